"""Import-linter contract types for rules the built-in types cannot say.

`private`: nothing imports another package's private module. A module whose name has a part
starting with `_` (`flows._story`, `tasks.slots._leases`) is private to the package above
that part (`flows`, `tasks.slots`): only that package and what is under it may import it.
Everyone else goes through the package's public names.

`names`: the source packages take from one module only the names allowed them, each written
in its import (`from dsstar.settings import default`); any other import of it, of a name or
of the module itself, breaks the contract. Listed imports ("importer -> module") are exempt.
"""

from __future__ import annotations

import re

import grimp
from importlinter import Contract, ContractCheck, fields, output


def owner_of(module: str) -> str | None:
    """The package a module is private to, or None for a public module."""
    parts = module.split(".")
    for index, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__"):
            return ".".join(parts[:index])
    return None


class PrivateModulesContract(Contract):
    type_name = "private"

    containers = fields.ListField(subfield=fields.StringField())

    def check(self, graph: grimp.ImportGraph, verbose: bool) -> ContractCheck:
        broken = []
        roots = tuple(self.containers)  # type: ignore[arg-type]
        for module in sorted(graph.modules):
            owner = owner_of(module)
            if owner is None or not module.startswith(roots):
                continue
            for importer in sorted(graph.find_modules_that_directly_import(module)):
                if importer == owner or importer.startswith(owner + "."):
                    continue
                for line in graph.get_import_details(importer=importer, imported=module):
                    broken.append((importer, module, owner, line["line_number"]))
        return ContractCheck(kept=not broken, metadata={"broken": broken})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for importer, module, owner, line in check.metadata["broken"]:
            output.print_error(f"{importer} imports {module} (l.{line}), private to {owner}")
            output.new_line()


class NamesContract(Contract):
    type_name = "names"

    source_modules = fields.ListField(subfield=fields.StringField())
    module = fields.StringField()
    allowed_names = fields.ListField(subfield=fields.StringField())
    ignore_imports = fields.ListField(subfield=fields.StringField(), required=False)

    def check(self, graph: grimp.ImportGraph, verbose: bool) -> ContractCheck:
        module = str(self.module)
        allowed = set(self.allowed_names)  # type: ignore[arg-type]
        ignored = {" ".join(i.split()) for i in self.ignore_imports or []}  # type: ignore[union-attr]
        sources = tuple(self.source_modules)  # type: ignore[arg-type]
        broken = []
        for importer in sorted(graph.find_modules_that_directly_import(module)):
            inside = any(importer == s or importer.startswith(s + ".") for s in sources)
            if not inside or f"{importer} -> {module}" in ignored:
                continue
            for line in graph.get_import_details(importer=importer, imported=module):
                names = imported_names(line["line_contents"], module)
                if names is None or not names <= allowed:
                    broken.append((importer, line["line_number"], line["line_contents"]))
        return ContractCheck(kept=not broken, metadata={"broken": broken, "module": module})

    def render_broken_contract(self, check: ContractCheck) -> None:
        allowed = ", ".join(sorted(self.allowed_names))  # type: ignore[arg-type]
        for importer, line, text in check.metadata["broken"]:
            output.print_error(
                f"{importer} (l.{line}): {text.strip()} takes from {check.metadata['module']}"
                f" more than {allowed}"
            )
            output.new_line()


def imported_names(line: str, module: str) -> set[str] | None:
    """The names that `line`, a `from <module> import ...` on one line, takes (aliases read
    as their names); None for any other import of the module (the module itself, or an
    import spread over lines, whose names cannot be read here)."""
    found = re.fullmatch(rf"\s*from\s+{re.escape(module)}\s+import\s+([^()#]+?)\s*(#.*)?", line)
    if not found:
        return None
    return {part.split()[0] for part in found.group(1).split(",") if part.strip()}
