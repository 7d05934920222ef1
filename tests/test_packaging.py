"""`pip install .` gives a working CLI: the wheel carries every data file and the entry points."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"


def test_wheel_ships_every_package_file_and_runs_from_itself(tmp_path: Path) -> None:
    # built as `pip install .` builds it (pip's isolated build environment), from a copy of
    # the tracked files: setuptools writes build/ and *.egg-info into the tree it builds
    tree = tmp_path / "tree"
    for f in subprocess.run(["git", "ls-files"], cwd=ROOT, check=True, capture_output=True,
                            text=True).stdout.splitlines():
        if (ROOT / f).is_file():
            (tree / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / f, tree / f)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w",
                    str(tmp_path), str(tree)], check=True, capture_output=True)
    [wheel] = tmp_path.glob("medpress-*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        z.extractall(tmp_path / "site")
    tracked = subprocess.run(["git", "ls-files", "src/medpress"], cwd=ROOT, check=True,
                             capture_output=True, text=True).stdout.split()
    expected = {str(Path(f).relative_to("src")) for f in tracked}
    assert sorted(expected - names) == []
    [ep] = [n for n in names if n.endswith("entry_points.txt")]
    with zipfile.ZipFile(wheel) as z:
        entry_points = z.read(ep).decode()
    assert "medpress = medpress.cli:app" in entry_points
    assert "medpress = medpress.inspect._registry" in entry_points
    # the unpacked wheel alone (not this checkout) answers --version: data files included
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import medpress.cli as c; "
            "assert c.__file__.startswith(sys.argv[1]), c.__file__; c.app(['--version'])")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "site")], cwd=tmp_path,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("medpress ") and lines[1].startswith("dataset medpress ")
