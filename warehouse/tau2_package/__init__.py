"""Runnable tau2-bench packages for exported domains: spec parts as data plus one generic runtime (template/)."""

from warehouse.tau2_package.build import TAU2_PREFIX, package_name, tau2_domain_name, write_tau2_package

__all__ = ["TAU2_PREFIX", "package_name", "tau2_domain_name", "write_tau2_package"]
