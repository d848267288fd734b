"""The worker dumps its stacks on SIGUSR1 (what the CLI reads before it kills a worker past its time limit)."""

import os
import signal
import subprocess
import sys
import time

PYTHON_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "python")


def test_sigusr1_dumps_the_workers_stacks_and_the_worker_goes_on():
    program = (
        "import sys, time\n"
        "from kforge_worker.__main__ import dump_stacks_on_request\n"
        "dump_stacks_on_request()\n"
        "def stuck_in_a_check():\n"
        "    print('ready', flush=True)\n"
        "    end = time.time() + 20\n"
        "    while time.time() < end:\n"
        "        time.sleep(0.01)\n"
        "stuck_in_a_check()\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", program], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": PYTHON_DIR}, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        proc.send_signal(signal.SIGUSR1)
        time.sleep(0.5)
        assert proc.poll() is None, "the dump does not end the worker: the CLI's kill does"
    finally:
        proc.kill()
    err = proc.stderr.read()
    assert "most recent call first" in err and "in stuck_in_a_check" in err
