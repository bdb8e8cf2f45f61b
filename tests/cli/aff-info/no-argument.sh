# No container given: bad usage, status 2.
aff-info
