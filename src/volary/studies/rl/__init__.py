"""The RL study (Aerial Gym, paper 003 Sec. V-C and V-D, and issue 22's learning results): the
named training recipes (``recipes``: the paper's tasks and hyperparameters, and volary's own)
and the ``volary rl`` commands that train, evaluate and export with them (``cli``); see
README.md. The PPO trainer (``ppo``) and its rsl_rl adapter are the study's;
checkpoints are core (:mod:`volary.learning.checkpoint`). Submodules are imported on use."""
