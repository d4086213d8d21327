"""The agents' Jinja templates (*.j2), read with importlib.resources."""
