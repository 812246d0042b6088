"""os-ken controller applications used by the tests and experiments."""
