"""A role's defaults as Ansible reads them: defaults/main.yml, or every file of defaults/main/ (the base role keeps
the option model of sglang_service, sglang_router, sglang_gateway and sglang_build there, one file each)."""

from pathlib import Path

ROLES = Path(__file__).resolve().parents[2] / "roles"


def role_defaults(role: str) -> dict:
    import yaml  # the controller venv's PyYAML (requirements.txt)

    base = ROLES / role / "defaults"
    files = [base / "main.yml"] if (base / "main.yml").exists() else sorted((base / "main").glob("*.yml"))
    out = {}
    for path in files:
        out.update(yaml.safe_load(path.read_text()) or {})
    return out


def role_default(role: str, name: str):
    """One default, from its one place."""
    return role_defaults(role)[name]
