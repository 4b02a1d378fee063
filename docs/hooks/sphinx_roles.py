"""griffe extension: Sphinx roles in docstrings become mkdocstrings cross-references.

The docstrings of ``src/`` speak torch's dialect (``:class:`DistributedSampler```,
``:meth:`set_epoch```), which reads well in ``help()`` and in a copied file. mkdocstrings
renders those roles as literal text, so at build time, and only in the text handed to the
renderer, each role is rewritten to ``[`set_epoch`][distsampling.windowed.SequentialWindowedDataset.set_epoch]``:
the name is resolved in the docstring's own scope (the class, then its module, then the
module's imports), as Python would. A role that names nothing is a warning, which fails
``mkdocs build --strict``. The files in ``src/`` are never touched.

Loaded by mkdocs.yml (``extensions: [docs/hooks/sphinx_roles.py]``).
"""

from __future__ import annotations

import logging
import re

import griffe

# a logger under "mkdocs.": its warnings fail `mkdocs build --strict`
log = logging.getLogger("mkdocs.plugins.sphinx_roles")

ROLE = re.compile(r":(?:py:)?(?P<role>class|func|meth|attr|mod|exc|obj|data):`(?P<target>[^`]+)`")


def _lookup(obj: griffe.Object, path: str) -> str | None:
    """The canonical path of the object at ``path`` (dotted, absolute), or None."""
    try:
        found = obj.modules_collection.get_member(path)
    except (KeyError, ValueError, AttributeError):
        return None
    try:
        return found.final_target.path if found.is_alias else found.path
    except griffe.AliasResolutionError:
        return found.target_path


def resolve(obj: griffe.Object, target: str) -> str | None:
    """The canonical path that ``target`` names in the scope of ``obj``, or None."""
    head, _, rest = target.partition(".")
    if head == obj.package.name:  # absolute: distsampling.x.y
        return _lookup(obj, target)
    scope: griffe.Object | None = obj
    while scope is not None:  # this object, then its parents, each with members and imports
        try:
            base = scope.resolve(head)
        except griffe.NameResolutionError:
            scope = scope.parent
            continue
        return _lookup(obj, f"{base}.{rest}" if rest else base)
    return None


def rewrite(obj: griffe.Object, text: str) -> str:
    """``text`` with every role it can resolve replaced by a cross-reference."""

    def link(m: re.Match) -> str:
        target = m["target"]
        short = target.startswith("~")
        target = target.lstrip("~.")
        path = resolve(obj, target)
        if path is None:  # a role naming nothing: fail the strict build, naming it
            log.warning("%s: %s names nothing the docs know", obj.path, m.group(0))
            return m.group(0)
        title = target.rsplit(".", 1)[-1] if short else target
        if m["role"] in {"func", "meth"}:
            title += "()"
        return f"[`{title}`][{path}]"

    return ROLE.sub(link, text)


class SphinxRoles(griffe.Extension):
    """Rewrite the roles of every docstring once the whole package is loaded."""

    def on_package(self, *, pkg: griffe.Module, **kwargs) -> None:
        self._walk(pkg, seen=set())

    def _walk(self, obj: griffe.Object, seen: set[str]) -> None:
        if obj.path in seen:
            return
        seen.add(obj.path)
        if obj.docstring is not None:
            obj.docstring.value = rewrite(obj, obj.docstring.value)
        for member in obj.members.values():
            if not member.is_alias:
                self._walk(member, seen)
