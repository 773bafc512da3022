"""The pure parts of benchmarks/serve_speed.py: requests, percentiles, the report row, the server's address."""

from __future__ import annotations

import logging

from scripts import load_script

from nmtkit.serve.app import LISTENING
from nmtkit.serve.app import log as serve_log

serve_speed = load_script("benchmarks/serve_speed.py", "serve_speed")


def test_requests_cover_every_line_once_in_order():
    lines = [f"line {index}" for index in range(7)]
    requests = serve_speed.chunks(lines, 3)
    assert [start for start, _ in requests] == [0, 3, 6]
    assert [line for _, chunk in requests for line in chunk] == lines


def test_percentile_is_the_nearest_rank():
    values = [float(value) for value in range(1, 21)]
    assert serve_speed.percentile(values, 0.5) == 10.0 and serve_speed.percentile(values, 0.95) == 19.0
    assert serve_speed.percentile([3.0], 0.95) == 3.0


def test_a_round_is_reported_against_translate():
    round_ = serve_speed.Round(clients=4, seconds=2.0, latencies=[0.01, 0.02, 0.03, 0.2], outputs=["A", "B", "x", "D"])
    row = serve_speed.format_round(round_, translate_seconds=4.0, expected=["A", "B", "C", "D"])
    assert row == "| 4 | 4 | 2.0 | 2.0 | 2.00 | 20 | 200 | 3/4 |"


def test_the_address_is_read_from_what_nmtkit_serve_logs(caplog):
    with caplog.at_level(logging.INFO, logger=serve_log.name):
        serve_log.info(LISTENING, "127.0.0.1", 41234)
    assert serve_speed.ADDRESS.search(caplog.text).group(1) == "http://127.0.0.1:41234"
