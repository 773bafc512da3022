"""Where a run executes: the device, threads and stop signals (device.py), the precision it computes in
(precision.py), and the processes of a data-parallel run (distributed.py)."""
