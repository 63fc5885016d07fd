"""Report import cycles among the modules under a package directory.

``python hack/import_cycles.py src/kccm/emulators`` reads every module's imports (all of
them, including those inside functions), keeps those naming a module of the same tree, and
prints each strongly connected group of two modules or more. Exit status 1 when there is one.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path


def module_name(path: Path, src: Path) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path, name: str, known: set[str]) -> set[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # ``from package import module`` imports the module (the package's __init__ has
            # run already); ``from module import name`` imports the module itself
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                for alias in node.names
            ]
        else:
            continue
        found |= {target for target in targets if target in known}
    found.discard(name)
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of two nodes or more."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def main(argv: list[str]) -> int:
    root = Path(argv[1] if len(argv) > 1 else "src/kccm/emulators")
    src = next(p for p in root.resolve().parents if not (p / "__init__.py").exists())
    files = sorted(root.resolve().rglob("*.py"))
    names = {module_name(f, src): f for f in files}
    known = set(names)
    graph = {name: imports_of(path, name, known) for name, path in names.items()}
    found = cycles(graph)
    print(f"{len(names)} modules, {sum(map(len, graph.values()))} imports, {len(found)} cycles")
    for group in found:
        print("cycle:", ", ".join(group))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
