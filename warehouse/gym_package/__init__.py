"""NeMo Gym resources servers for exported domains: the spec as data, the seeded databases and one runtime
(template/), plus the server app Gym's launcher starts."""

from warehouse.gym_package.build import server_name, write_gym_server

__all__ = ["server_name", "write_gym_server"]
