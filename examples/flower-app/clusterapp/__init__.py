"""A Flower app that clusters its clients with a fedcluster method."""
