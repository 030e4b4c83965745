# launch-ssh against sshd daemons the test starts (tests/support/ssh_hosts.sh): it needs
# the worker, the plugins, openssh-server and, for namespace hosts, root and iproute2.
# Exits 77 when no sshd starts. Runs alone: it makes network namespaces and ports.
# The appliance build (CINFER_MINIMAL) has no launch-ssh: the test then skips.
add_dependencies(test_launch_ssh cinfer_worker)
foreach(plugin cinfer_plugin_launch_ssh cinfer_plugin_tokenizer_bpe)
  if(TARGET ${plugin})
    add_dependencies(test_launch_ssh ${plugin})
  endif()
endforeach()
set_tests_properties(test_launch_ssh PROPERTIES SKIP_RETURN_CODE 77 RUN_SERIAL TRUE TIMEOUT 900)
if(NOT TARGET cinfer_plugin_launch_ssh)
  target_compile_definitions(test_launch_ssh PRIVATE CINFER_TEST_NO_LAUNCH_SSH=1)
endif()
