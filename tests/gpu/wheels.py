"""Carried wheels for a GPU machine without internet or uv: unpack the missing ones into one folder.

A wheel is a zip of the files ``pip install`` would put in site-packages, so unpacking it into a
folder on ``PYTHONPATH`` makes it importable, with no pip and no network. Only wheels whose package
is not installed already are unpacked (an installed numpy or pytest is left to win), and only
those built for this Python and CPU.
"""

from __future__ import annotations

import importlib.util
import platform
import re
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

WHEELS_TXT = Path(__file__).resolve().parent / "wheels.txt"


@dataclass(frozen=True)
class Wheel:
    path: Path
    dist: str  # normalised distribution name: liger_kernel
    module: str  # the top-level package to import: liger_kernel, markdown_it
    python_tag: str  # cp312, py3
    abi_tag: str  # cp312, abi3, none
    platform_tag: str  # manylinux_2_17_x86_64..., any

    @property
    def fits(self) -> bool:
        """Built for this interpreter and CPU."""
        here = sys.version_info.major * 100 + sys.version_info.minor
        built = [int(t[2:3]) * 100 + int(t[3:]) for t in self.python_tag.split(".") if re.fullmatch(r"cp\d{2,3}", t)]
        python_ok = (self.python_tag.startswith("py3") or here in built
                     or (self.abi_tag == "abi3" and any(b <= here for b in built)))
        platform_ok = self.platform_tag == "any" or platform.machine() in self.platform_tag
        return python_ok and platform_ok

    @property
    def installed(self) -> bool:
        return importlib.util.find_spec(self.module) is not None


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def read_wheel(path: Path) -> Wheel:
    parts = path.name[:-len(".whl")].split("-")
    python_tag, abi_tag, platform_tag = parts[-3:]
    dist = normalise(parts[0])
    with zipfile.ZipFile(path) as z:
        tops = []
        for name in z.namelist():
            top = name.split("/")[0]
            if top.endswith((".dist-info", ".data")):
                continue
            top = top[:-3] if top.endswith(".py") else top
            if top not in tops:
                tops.append(top)
    module = dist if dist in tops else (tops[0] if tops else dist)
    return Wheel(path, dist, module, python_tag, abi_tag, platform_tag)


def carried(folder: Path) -> list[Wheel]:
    return [read_wheel(p) for p in sorted(Path(folder).glob("*.whl"))] if Path(folder).is_dir() else []


def listed(wheels_txt: Path = WHEELS_TXT) -> list[str]:
    """The distributions wheels.txt names (normalised), in its order."""
    out = []
    for line in wheels_txt.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            out.append(normalise(re.split(r"[<>=!~;\[ ]", line)[0]))
    return out


def unpack(wheels: list[Wheel], site: Path) -> list[Wheel]:
    """Unpack the wheels that fit this machine and are not installed into ``site``; return those."""
    done = []
    for wheel in wheels:
        if wheel.installed or not wheel.fits:
            continue
        with zipfile.ZipFile(wheel.path) as z:
            z.extractall(site)
        done.append(wheel)
    return done
