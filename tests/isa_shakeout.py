"""`make test-isa`: the numerics-sensitive tests (marker `isa`) once per CPU kernel family this code can meet.

CTranslate2, ATen (PyTorch's CPU kernels), MKL and oneDNN each choose AVX2, AVX-512 or VNNI code when they start;
CTranslate2 uses MKL on Intel CPUs and oneDNN on AMD ones; int8 products without VNNI add pairs in 16 bits that
saturate. A test that holds on this machine's kernels may fail on another's (issue 47: three CPU kinds broke the
suite). Each setting below forces the kernels of one kind of machine, in a pytest process of its own (the libraries
read these variables once); a setting that needs an instruction this CPU lacks is skipped and says so. Extra
arguments go to every pytest run (e.g. `-x`, `-k int8`).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
AVX2 = {"CT2_FORCE_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2",
        "MKL_ENABLE_INSTRUCTIONS": "AVX2"}
AVX512 = {"CT2_FORCE_CPU_ISA": "AVX512", "ATEN_CPU_CAPABILITY": "avx512"}
NEEDS_AVX512 = ["avx512f", "avx512bw", "avx512dq", "avx512vl"]

# (name, the machines it stands for, environment, CPU flags it needs)
SETTINGS = [
    ("native", "this CPU's own choice", {}, []),
    ("generic", "no vector kernels", {"CT2_FORCE_CPU_ISA": "GENERIC", "ATEN_CPU_CAPABILITY": "default"}, []),
    ("avx", "x86 before 2013", {"CT2_FORCE_CPU_ISA": "AVX", "ATEN_CPU_CAPABILITY": "default"}, ["avx"]),
    ("avx2-mkl", "Intel Haswell to Comet Lake", AVX2, ["avx2", "fma"]),
    ("avx2-onednn", "AMD Zen 2 and 3", {**AVX2, "CT2_USE_MKL": "0"}, ["avx2", "fma"]),
    ("avx512-mkl", "Intel Skylake-SP: AVX-512 without VNNI",
     {**AVX512, "ONEDNN_MAX_CPU_ISA": "AVX512_CORE", "MKL_ENABLE_INSTRUCTIONS": "AVX512"}, NEEDS_AVX512),
    ("avx512-onednn", "AMD Zen 4 and 5", {**AVX512, "CT2_USE_MKL": "0"}, NEEDS_AVX512),
]


def cpu_flags() -> set[str]:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def run_setting(environment: dict[str, str], pytest_args: list[str]) -> tuple[int, str, float]:
    """(exit status, output, seconds) of the isa tests under `environment`."""
    start = time.perf_counter()
    env = {**clean_environment(), **environment}
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "isa",
                             *pytest_args, "tests"], cwd=ROOT, env=env, capture_output=True, text=True)
    return result.returncode, result.stdout + result.stderr, time.perf_counter() - start


def clean_environment() -> dict[str, str]:
    """This process's environment without the variables the settings choose (one setting must not leak into
    another through the caller's shell)."""
    chosen = {name for _, _, environment, _ in SETTINGS for name in environment} | {"CT2_USE_MKL"}
    return {name: value for name, value in os.environ.items() if name not in chosen}


def summary_line(output: str) -> str:
    lines = [line for line in output.splitlines() if line.strip()]
    return lines[-1].strip("= ") if lines else "no output"


def main(pytest_args: list[str]) -> int:
    flags = cpu_flags()
    runnable = [(name, about, env) for name, about, env, needs in SETTINGS if set(needs) <= flags]
    for name, about, _, needs in SETTINGS:
        if not set(needs) <= flags:
            print(f"{name:14} skipped: this CPU lacks {', '.join(sorted(set(needs) - flags))} ({about})")
    with ThreadPoolExecutor(max_workers=2) as pool:  # two single-threaded pytest processes: the 2-core machines
        results = list(pool.map(lambda setting: run_setting(setting[2], pytest_args), runnable))
    failed = []
    for (name, about, env), (status, output, seconds) in zip(runnable, results):
        settings = " ".join(f"{key}={value}" for key, value in env.items()) or "(none)"
        print(f"{name:14} {summary_line(output)} in {seconds:.0f} s [{about}: {settings}]")
        if status != 0:
            failed.append((name, status, output))
    for name, status, output in failed:
        reason = "no test is marked isa (pytest exit status 5)" if status == 5 else f"exit status {status}"
        print(f"\n===== {name}: {reason} =====\n{output}")
    print(f"test-isa: {len(runnable) - len(failed)} of {len(runnable)} settings passed", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
