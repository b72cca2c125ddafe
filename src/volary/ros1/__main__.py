"""``python -m volary.ros1 serve ...``: the ``volary ros1`` commands without the entry point."""

from volary.ros1.cli import ros1_app

ros1_app(prog_name="python -m volary.ros1")
