# fish completion for aff-info
complete -c aff-info -l tensors -d 'list every tensor of the directory'
complete -c aff-info -l json -d 'print the result as one JSON object'
complete -c aff-info -l progress -x -a 'auto always never' -d 'show progress'
complete -c aff-info -s q -l quiet -d 'print nothing on stderr but errors'
complete -c aff-info -l help -d 'show usage'
complete -c aff-info -l version -d 'show the version'
complete -c aff-info -k -x -a '(__fish_complete_suffix .aff)'
