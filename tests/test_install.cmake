# The install test installs the whole build tree, so everything must be built first;
# a static-plugin build has no shared libcinfer or plugin files to install this way.
if(CINFER_STATIC_PLUGINS)
  set_tests_properties(test_install PROPERTIES DISABLED TRUE)
endif()
set_tests_properties(test_install PROPERTIES RUN_SERIAL TRUE)
add_dependencies(test_install cinfer_cli cinfer_worker)
