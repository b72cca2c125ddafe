"""FLYINGTRUST (paper 004): the navigation benchmark protocol, its score, planner slate, ROS 1
planners, report and ``volary bench`` commands. Layer 6; ``README.md`` says what it reproduces.
Modules are imported on use."""
