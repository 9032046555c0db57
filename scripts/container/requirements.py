"""Print the project's requirements from pyproject.toml, one a line, for an image's pip install.

Usage: python3 requirements.py pyproject.toml [extra ...]

The image installs its dependencies before it copies the code, so that a code change does not
reinstall them; pyproject.toml stays the one place they are listed.
"""

from __future__ import annotations

import sys
import tomllib


def requirements(pyproject: dict, extras: list[str]) -> list[str]:
    project = pyproject["project"]
    optional = project.get("optional-dependencies", {})
    unknown = [name for name in extras if name not in optional]
    if unknown:
        raise SystemExit(f"no such extra in pyproject.toml: {', '.join(unknown)} "
                         f"(it has: {', '.join(sorted(optional))})")
    lines = list(project.get("dependencies", []))
    for name in extras:
        lines += [req for req in optional[name] if req not in lines]
    return lines


def main(argv: list[str]) -> int:
    if not argv:
        raise SystemExit(__doc__.strip().splitlines()[2])
    with open(argv[0], "rb") as f:
        print("\n".join(requirements(tomllib.load(f), argv[1:])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
