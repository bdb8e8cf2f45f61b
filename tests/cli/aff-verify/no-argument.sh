# Nothing to verify: bad usage naming the three modes, status 2.
aff-verify
