"""Every method's registry name and the module whose import registers it (kept static so listing is cheap)."""

METHODS: dict[str, str] = {}
