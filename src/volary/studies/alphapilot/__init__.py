"""The AlphaPilot 2019 study (FlightGoggles, paper 001 Sec. V-C): the race's protocol and
leaderboard (``race``), the oracle racers (``racers``), the challenge from sensors
(``interface``, ``challenge``) with its reference contestant (``sensor_racer``, ``estimation``,
``gate_detector``), its reports (``reports``) and the ``volary race`` command (``cli``); see
README.md. Submodules are imported on use."""
