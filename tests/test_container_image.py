"""The Dockerfile's images hold what the code imports and reads, without building anything.

Each image target (`site`, `worker`) is followed through its stages: every first-party package
that its entry points import, directly or through one another (lazy imports inside functions
count), must be copied to the same place as in a checkout, since the settings and the sandbox
find files by the checkout's layout; so must the data the settings name. Third-party imports
must come from the extras the image installs. The full build is `make test-image`.
"""

from __future__ import annotations

import ast
import re
import shlex
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import metadata
from pathlib import Path, PurePosixPath

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Where pyproject.toml's packages.find looks for top-level packages.
PACKAGE_ROOTS = (ROOT, ROOT / "client")
# What each image runs: the site (gunicorn, manage.py) and the worker (celery, then `pkb eval`,
# which is evaluator.cli).
ENTRY_PACKAGES = {"site": ("portal", "worker", "evaluator"), "worker": ("worker", "evaluator")}
IMAGE_EXTRAS = ("portal", "client")  # what the Dockerfile's deps stage installs
DEVELOPMENT = ("tests", "notes", "scripts", ".ci", ".git", "docs/screenshots", "Makefile", ".")
APP = PurePosixPath("/app")


@dataclass
class Stage:
    name: str
    parent: str  # the image or stage named in FROM
    workdir: PurePosixPath = PurePosixPath("/")
    copies: dict[str, PurePosixPath] = field(default_factory=dict)  # build-context path -> image path
    instructions: list[str] = field(default_factory=list)


def instructions(text: str) -> list[tuple[str, str]]:
    joined = re.sub(r"\\\n", " ", text)
    lines = [line.strip() for line in joined.splitlines()]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1] if " " in line else "")
            for line in lines if line and not line.startswith("#")]


def parse(text: str) -> dict[str, Stage]:
    stages: dict[str, Stage] = {}
    stage: Stage | None = None
    for keyword, args in instructions(text):
        if keyword == "FROM":
            words = args.split()
            name = words[2] if len(words) > 2 and words[1].upper() == "AS" else f"stage{len(stages)}"
            parent = stages.get(words[0])
            stage = Stage(name, words[0], parent.workdir if parent else PurePosixPath("/"),
                          dict(parent.copies) if parent else {}, list(parent.instructions) if parent else [])
            stages[name] = stage
            continue
        if stage is None:  # ARG before the first FROM: a build argument FROM lines may use
            continue
        stage.instructions.append(keyword)
        if keyword == "WORKDIR":
            stage.workdir = stage.workdir / args
        elif keyword == "USER":
            stage.instructions.append(f"USER {args}")
        elif keyword in ("COPY", "ADD") and "--from=" not in args:
            words = [w for w in shlex.split(args) if not w.startswith("--")]
            *sources, dest = words
            target = stage.workdir / dest
            for source in sources:
                into_dir = dest.endswith("/") or len(sources) > 1
                stage.copies[source.rstrip("/")] = target / PurePosixPath(source).name if into_dir else target
    return stages


def target_stage(text: str, target: str | None) -> Stage:
    stages = parse(text)
    if target and target not in stages:
        pytest.fail(f"the Dockerfile has no stage {target!r} (FROM ... AS {target}); it has {sorted(stages)}")
    return stages[target] if target else list(stages.values())[-1]


def package_dirs() -> dict[str, Path]:
    return {p.name: p for root in PACKAGE_ROOTS for p in root.iterdir() if (p / "__init__.py").is_file()}


@lru_cache(maxsize=None)
def imported_names(package: Path) -> frozenset[str]:
    names: set[str] = set()
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return frozenset(names)


@lru_cache(maxsize=None)
def reachable(entries: tuple[str, ...]) -> tuple[set[str], set[str]]:
    """First-party packages the entries import, transitively; and the third-party names."""
    first_party, todo, third_party = package_dirs(), list(entries), set()
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for imported in imported_names(first_party[name]):
            if imported in first_party:
                todo.append(imported)
            elif imported not in sys.stdlib_module_names:
                third_party.add(imported)
    return seen, third_party


def in_checkout_place(stage: Stage, repo_path: str) -> bool:
    """Copied to /app/<repo_path>, itself or as part of a copied folder."""
    for source, dest in stage.copies.items():
        inside = PurePosixPath(repo_path).is_relative_to(source) if source != "." else True
        if inside and dest / PurePosixPath(repo_path).relative_to(source if source != "." else "") \
                == APP / repo_path:
            return True
    return False


def missing_packages(text: str, target: str | None, entries: tuple[str, ...]) -> list[str]:
    stage, dirs = target_stage(text, target), package_dirs()
    packages, _ = reachable(entries)
    paths = sorted(dirs[name].relative_to(ROOT).as_posix() for name in packages)
    return [path for path in paths if not in_checkout_place(stage, path)]


def dockerfile() -> str:
    return (ROOT / "Dockerfile").read_text()


# Today's problem, as the Dockerfile had it before the images were built: a checker that did not
# catch this would pass a Dockerfile whose image fails on its first import.
OLD_DOCKERFILE = """
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md* ./
COPY evaluator evaluator
COPY problems problems
COPY portal portal
COPY worker worker
COPY hardware hardware
"""


def test_it_catches_a_dockerfile_that_leaves_out_contract_and_the_client() -> None:
    assert missing_packages(OLD_DOCKERFILE, None, ENTRY_PACKAGES["site"]) == ["client/pkb_client", "contract"]


def test_it_catches_a_package_copied_to_the_wrong_place() -> None:
    text = OLD_DOCKERFILE + "COPY contract /opt/contract\nCOPY client/pkb_client /app/pkb_client\n"
    assert missing_packages(text, None, ENTRY_PACKAGES["site"]) == ["client/pkb_client", "contract"]


@pytest.mark.parametrize("target", sorted(ENTRY_PACKAGES))
def test_each_image_holds_every_package_its_code_imports(target: str) -> None:
    missing = missing_packages(dockerfile(), target, ENTRY_PACKAGES[target])
    assert missing == [], f"the {target} image would fail to import these: COPY each to /app/<path>"


def test_the_site_image_holds_the_data_its_settings_name() -> None:
    from django.conf import settings

    from portal.catalog.prompt_hardware import EXAMPLES

    base = Path(settings.BASE_DIR)
    named = [*settings.TEMPLATES[0]["DIRS"], *settings.STATICFILES_DIRS, settings.PKB_HARDWARE_DIR,
             settings.PKB_RESULTS_DIR, settings.PKB_MEASUREMENTS_DIR, base / "manage.py",
             *(base / rel for rel, _ in EXAMPLES.values())]
    stage = target_stage(dockerfile(), "site")
    missing = [p for p in (Path(n).relative_to(base).as_posix() for n in named) if not in_checkout_place(stage, p)]
    assert missing == [], "the site's settings name these; COPY each to /app/<path>"


def test_the_worker_image_holds_the_hardware_profiles() -> None:
    from evaluator.hardware.profiles import hardware_dir

    rel = Path(hardware_dir()).relative_to(ROOT).as_posix()
    assert in_checkout_place(target_stage(dockerfile(), "worker"), rel)


@lru_cache(maxsize=None)
def distribution_closure(extras: tuple[str, ...]) -> set[str]:
    """The distributions `pip install .[extras]` brings in, as installed here, lower-cased."""
    def norm(name: str) -> str:
        return re.sub(r"[-_.]+", "-", name).lower()

    wanted = [r for r in metadata.requires("pkb-portal") or []
              if "extra ==" not in r or any(f'extra == "{e}"' in r for e in extras)]
    seen: set[str] = set()
    todo = [re.split(r"[\s;<>=!~\[(]", r, maxsplit=1)[0] for r in wanted]
    while todo:
        name = norm(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        todo += [re.split(r"[\s;<>=!~\[(]", r, maxsplit=1)[0] for r in requires if "extra ==" not in r]
    return seen


@pytest.mark.parametrize("target", sorted(ENTRY_PACKAGES))
def test_each_image_installs_every_third_party_package_its_code_imports(target: str) -> None:
    _, third_party = reachable(ENTRY_PACKAGES[target])
    providers = metadata.packages_distributions()
    closure = distribution_closure(IMAGE_EXTRAS)
    missing = {name: providers.get(name, ["(not installed here)"]) for name in sorted(third_party)
               if not any(re.sub(r"[-_.]+", "-", d).lower() in closure for d in providers.get(name, []))}
    assert missing == {}, f"imported by the {target} image's code, not installed by .[{','.join(IMAGE_EXTRAS)}]"


@pytest.mark.parametrize("target", sorted(ENTRY_PACKAGES))
def test_each_image_leaves_out_development_files(target: str) -> None:
    stage = target_stage(dockerfile(), target)
    copied = [s for s in stage.copies
              if any(s == d or PurePosixPath(s).is_relative_to(d) for d in DEVELOPMENT if d != ".")
              or s == "."]
    assert copied == [], f"development files copied into the {target} image"


@pytest.mark.parametrize("target", sorted(ENTRY_PACKAGES))
def test_each_image_runs_as_a_user_with_a_health_check(target: str) -> None:
    stage = target_stage(dockerfile(), target)
    users = [i.split(None, 1)[1] for i in stage.instructions if i.startswith("USER ")]
    assert users and users[-1].split(":")[0] not in ("root", "0")
    assert "HEALTHCHECK" in stage.instructions


def test_the_base_image_is_a_build_argument() -> None:
    stages = parse(dockerfile())
    assert re.search(r"^ARG BASE=python:3\.11-slim", dockerfile(), re.M)
    assert {s.parent for s in stages.values() if s.parent not in stages} == {"${BASE}"}
