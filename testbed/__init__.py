"""edgeflow's testbed: hosts in network namespaces, switches under test, controllers, traffic."""
