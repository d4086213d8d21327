"""An import-linter contract type for a rule the built-in types cannot say: nothing imports
another package's private module.

A module whose name has a part starting with `_` (`flows._story`, `tasks.slots._leases`) is
private to the package above that part (`flows`, `tasks.slots`): only that package and what
is under it may import it. Everyone else goes through the package's public names.
"""

from __future__ import annotations

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
