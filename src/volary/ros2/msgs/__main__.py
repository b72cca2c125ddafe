"""``python -m volary.ros2.msgs build|clean``: build the tf2_msgs/mavros_msgs Python packages.

Run it with the interpreter that will import them (the venv holding the ROS 2 wheels); see the
package docstring for what gets built, where, and why.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from volary.ros2.msgs import MsgBuildError, build, clean, default_prefix


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m volary.ros2.msgs",
        description="Generate and compile the ROS 2 message packages tf2_msgs (TFMessage) and "
        "mavros_msgs (AttitudeTarget), which have no pip wheel, for this interpreter.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    prefix_help = f"install folder (default: this interpreter's site-packages, {default_prefix()})"
    b = sub.add_parser("build", help="build and install (returns at once when up to date)")
    b.add_argument("--prefix", type=Path, help=prefix_help + "; add DIR to PYTHONPATH")
    b.add_argument("--force", action="store_true", help="rebuild even when up to date")
    b.add_argument("-j", "--jobs", type=int, help="parallel compiler processes (default: cores)")
    b.add_argument("-v", "--verbose", action="store_true", help="show generator/compiler output")
    c = sub.add_parser("clean", help="remove the packages this tool installed in the prefix")
    c.add_argument("--prefix", type=Path, help=prefix_help)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "build":
            build(args.prefix, force=args.force, jobs=args.jobs, verbose=args.verbose)
            if args.prefix is not None:
                print(f"import them with PYTHONPATH={args.prefix.resolve()}")
        else:
            clean(args.prefix)
    except MsgBuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
