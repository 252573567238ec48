"""The interop matrix behind scripts/interop.py: our relay and client against aiomoqt, moq-dev,
Cloudflare and browser clients. Modules, in the order they build on each other: config, common,
relays, clients, clocks, browsers, matrix, docs."""
