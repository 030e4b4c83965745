# launch-ssh against sshd daemons the test starts (tests/support/ssh_hosts.sh): it needs
# the worker, the plugins, openssh-server and, for namespace hosts, root and iproute2.
# Exits 77 when no sshd starts. Runs alone: it makes network namespaces and ports.
add_dependencies(test_launch_ssh cinfer_worker cinfer_plugin_launch_ssh)
if(TARGET cinfer_plugin_tokenizer_bpe)
  add_dependencies(test_launch_ssh cinfer_plugin_tokenizer_bpe)
endif()
set_tests_properties(test_launch_ssh PROPERTIES SKIP_RETURN_CODE 77 RUN_SERIAL TRUE TIMEOUT 900)
