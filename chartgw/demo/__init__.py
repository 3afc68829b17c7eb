"""The demo, above the groups: `seeding` (each group's seeder, the demo key and settings, keep-fresh), one module
per group (`<group>.py`: its `seed`), the sample payloads (`samples/`) and the replay server (`replay`).

Importing this package imports nothing else, so a sample module can be read without the platform.
"""
