# test_config runs `cinfer config` and reads examples/cinfer.cfg and docs/configuration.md.
add_dependencies(test_config cinfer_cli)
