# Neither a profile nor --imatrix: bad usage.
aff-profile
