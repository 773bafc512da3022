"""tests/isa_shakeout.py (make test-isa): which settings run, and that any failure, or no isa test at all, fails."""

from __future__ import annotations

import isa_shakeout


def test_settings_this_cpu_lacks_are_skipped_and_every_failure_fails(monkeypatch, capsys):
    monkeypatch.setattr(isa_shakeout, "cpu_flags", lambda: {"avx", "avx2", "fma"})  # an AVX2 CPU such as Zen 3
    runs = []

    def run_setting(environment, pytest_args):
        runs.append(environment)
        status = 5 if environment.get("CT2_USE_MKL") == "0" else 0  # pytest's status when no test is selected
        return status, "3 passed in 1.00s\n" if status == 0 else "no tests ran in 0.01s\n", 1.0

    monkeypatch.setattr(isa_shakeout, "run_setting", run_setting)
    assert isa_shakeout.main(["-x"]) == 1
    out = capsys.readouterr().out
    assert len(runs) == 5 and all(env.get("CT2_FORCE_CPU_ISA") != "AVX512" for env in runs)
    assert out.count("skipped: this CPU lacks avx512bw, avx512dq, avx512f, avx512vl") == 2
    assert "avx2-onednn: no test is marked isa (pytest exit status 5)" in out
    monkeypatch.setattr(isa_shakeout, "run_setting", lambda environment, pytest_args: (0, "1 passed\n", 1.0))
    assert isa_shakeout.main([]) == 0


def test_settings_do_not_leak_from_the_callers_environment(monkeypatch):
    monkeypatch.setenv("CT2_FORCE_CPU_ISA", "GENERIC")
    monkeypatch.setenv("CT2_USE_MKL", "0")
    clean = isa_shakeout.clean_environment()
    assert "CT2_FORCE_CPU_ISA" not in clean and "CT2_USE_MKL" not in clean and "PATH" in clean
