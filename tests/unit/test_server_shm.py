"""Python-backend shared-memory regions: per-launch names, removal, and sweeping of dead launchers'."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from tritonkit.server import _shm


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_new_prefix_names_this_process_and_differs_when_called_twice() -> None:
    first, second = _shm.new_prefix(), _shm.new_prefix()
    assert first.startswith(f"tritonkit_{os.getpid()}_") and first.endswith("_")
    assert first != second


def test_backend_config_args_cover_every_python_based_backend_when_built() -> None:
    args = _shm.backend_config_args("tritonkit_1_ab_")
    assert args == [
        "--backend-config=python,shm-region-prefix-name=tritonkit_1_ab_",
        "--backend-config=onnxruntime,shm-region-prefix-name=tritonkit_1_ab_",
    ]


def test_remove_regions_removes_only_the_given_prefix_when_several_exist(tmp_path: Path) -> None:
    (tmp_path / "tritonkit_1_aa_r1").write_bytes(b"x")
    (tmp_path / "tritonkit_1_aa_r2").write_bytes(b"x")
    (tmp_path / "tritonkit_1_bb_r1").write_bytes(b"x")
    (tmp_path / "triton_python_backend_shm_region_other").write_bytes(b"x")
    assert _shm.remove_regions("tritonkit_1_aa_", tmp_path) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "triton_python_backend_shm_region_other",
        "tritonkit_1_bb_r1",
    ]


def test_sweep_stale_regions_removes_dead_launchers_regions_only_when_no_process_uses_them(
    tmp_path: Path,
) -> None:
    dead = dead_pid()
    live = os.getpid()
    (tmp_path / f"tritonkit_{dead}_0123abcd_region").write_bytes(b"x")
    (tmp_path / f"tritonkit_{live}_0123abcd_region").write_bytes(b"x")
    (tmp_path / "triton_python_backend_shm_region_someone_else").write_bytes(b"x")
    assert _shm.sweep_stale_regions(tmp_path) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "triton_python_backend_shm_region_someone_else",
        f"tritonkit_{live}_0123abcd_region",
    ]


def test_sweep_stale_regions_keeps_regions_when_an_orphaned_stub_still_names_them(tmp_path: Path) -> None:
    dead = dead_pid()
    prefix = f"tritonkit_{dead}_feedbeef_"
    region = tmp_path / f"{prefix}region"
    region.write_bytes(b"x")
    # A live process whose command line names the region, as a backend stub's does.
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; time.sleep(30)", f"{prefix}region"]
    )
    try:
        # /proc/<pid>/cmdline reads empty for a moment after spawn: wait until it names the region.
        cmdline = Path(f"/proc/{holder.pid}/cmdline")
        deadline = time.monotonic() + 10
        while prefix.encode() not in cmdline.read_bytes() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _shm.sweep_stale_regions(tmp_path) == 0
        assert region.exists()
    finally:
        holder.kill()
        holder.wait()
