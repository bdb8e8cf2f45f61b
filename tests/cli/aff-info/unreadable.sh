# A directory cannot be read as a container (chmod 000 would not stop root).
mkdir model.aff
aff-info model.aff
