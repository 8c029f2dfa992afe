"""The PEP 517 build backend of the intentd package: setuptools, with a
standard-library fallback for wheels.

setuptools builds wheels through the `bdist_wheel` command, which before
setuptools 70.1 lives in the separate `wheel` package. A fresh venv of the
Python 3.9-3.12 era has pip and setuptools but not `wheel`, and a machine
without a package index cannot fetch it, so `pip install --no-index
--no-build-isolation ./sdk/python` would fail there. This backend hands
every hook to setuptools.build_meta when setuptools can build wheels, and
otherwise builds the (pure-Python, src-layout) wheel itself with zipfile.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import zipfile
from typing import Any, Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # sdk/python
SRC = os.path.join(HERE, "src")
PACKAGE = "intentd"


def _setuptools_can_build_wheels() -> bool:
    try:
        import setuptools.build_meta  # noqa: F401
    except ImportError:
        return False
    try:
        import setuptools.command.bdist_wheel  # noqa: F401  (setuptools >= 70.1)
        return True
    except ImportError:
        pass
    try:
        import wheel.bdist_wheel  # noqa: F401
        return True
    except ImportError:
        return False


if _setuptools_can_build_wheels():
    from setuptools.build_meta import *  # noqa: F401,F403
    from setuptools.build_meta import (build_sdist, build_wheel, get_requires_for_build_sdist,  # noqa: F401
                                       get_requires_for_build_wheel, prepare_metadata_for_build_wheel)

    try:
        from setuptools.build_meta import build_editable, get_requires_for_build_editable  # noqa: F401
    except ImportError:  # setuptools < 64
        pass
else:
    def _project() -> Dict[str, str]:
        """The few [project] fields the metadata needs, read from
        pyproject.toml (tomllib is 3.11+, so by pattern)."""
        with open(os.path.join(HERE, "pyproject.toml"), encoding="utf-8") as f:
            text = f.read()
        table = re.split(r"^\[project\]\s*$", text, maxsplit=1, flags=re.M)[1].split("\n[", 1)[0]
        out = {}
        for k in ("name", "version", "description", "requires-python"):
            m = re.search(r'^%s\s*=\s*"([^"]*)"' % re.escape(k), table, re.M)
            if m:
                out[k] = m.group(1)
        return out

    def _metadata() -> str:
        p = _project()
        with open(os.path.join(HERE, "README.md"), encoding="utf-8") as f:
            readme = f.read()
        return ("Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: %s\nRequires-Python: %s\n"
                "Description-Content-Type: text/markdown\n\n%s" % (
                    p["name"], p["version"], p.get("description", ""), p.get("requires-python", ""), readme))

    def _dist_info() -> str:
        p = _project()
        return "%s-%s.dist-info" % (p["name"], p["version"])

    _WHEEL = "Wheel-Version: 1.0\nGenerator: intentd_build_backend\nRoot-Is-Purelib: true\nTag: py3-none-any\n"

    def get_requires_for_build_wheel(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
        return []

    def get_requires_for_build_sdist(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
        return []

    def get_requires_for_build_editable(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
        return []

    def prepare_metadata_for_build_wheel(metadata_directory: str,
                                         config_settings: Optional[Dict[str, Any]] = None) -> str:
        d = os.path.join(metadata_directory, _dist_info())
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "METADATA"), "w", encoding="utf-8") as f:
            f.write(_metadata())
        with open(os.path.join(d, "WHEEL"), "w", encoding="utf-8") as f:
            f.write(_WHEEL)
        return os.path.basename(d)

    def _write_wheel(wheel_directory: str, files: List[Tuple[str, bytes]], tag: str = "") -> str:
        p = _project()
        name = "%s-%s%s-py3-none-any.whl" % (p["name"], p["version"], tag)
        di = _dist_info()
        files = files + [(di + "/METADATA", _metadata().encode("utf-8")), (di + "/WHEEL", _WHEEL.encode()),
                         (di + "/top_level.txt", (PACKAGE + "\n").encode())]
        record = []
        with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
            for arc, data in files:
                z.writestr(arc, data)
                digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
                record.append("%s,sha256=%s,%d" % (arc, digest, len(data)))
            record.append(di + "/RECORD,,")
            z.writestr(di + "/RECORD", "\n".join(record) + "\n")
        return name

    def build_wheel(wheel_directory: str, config_settings: Optional[Dict[str, Any]] = None,
                    metadata_directory: Optional[str] = None) -> str:
        files = []
        pkg = os.path.join(SRC, PACKAGE)
        for root, dirs, names in os.walk(pkg):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for n in sorted(names):
                if n.endswith(".py") or n == "py.typed":
                    full = os.path.join(root, n)
                    with open(full, "rb") as f:
                        files.append((os.path.relpath(full, SRC).replace(os.sep, "/"), f.read()))
        return _write_wheel(wheel_directory, files)

    def build_editable(wheel_directory: str, config_settings: Optional[Dict[str, Any]] = None,
                       metadata_directory: Optional[str] = None) -> str:
        return _write_wheel(wheel_directory, [("__editable__.%s.pth" % PACKAGE, (SRC + "\n").encode())])

    def build_sdist(sdist_directory: str, config_settings: Optional[Dict[str, Any]] = None) -> str:
        import tarfile
        p = _project()
        base = "%s-%s" % (p["name"], p["version"])
        name = base + ".tar.gz"
        with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as t:
            for rel in ("pyproject.toml", "README.md", "build_backend", "src"):
                t.add(os.path.join(HERE, rel), arcname=base + "/" + rel,
                      filter=lambda ti: None if "__pycache__" in ti.name else ti)
            info = t.gettarinfo(os.path.join(HERE, "pyproject.toml"), arcname=base + "/PKG-INFO")
            data = _metadata().encode("utf-8")
            info.size = len(data)
            import io
            t.addfile(info, io.BytesIO(data))
        return name
