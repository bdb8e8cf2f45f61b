# A file that does not exist: one line naming it and the OS reason, status 1.
aff-info missing.aff
