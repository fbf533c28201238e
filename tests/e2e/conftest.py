"""End-to-end tests with real client libraries against a real dpgate and
dpgate-sim. The process helpers are the integration tests' (harness.py)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
