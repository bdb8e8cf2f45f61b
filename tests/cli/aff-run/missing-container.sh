# A container path that does not exist says so as aff-info does.
aff-run -m missing.aff -p hi
