# launch-mpi with mpirun: the plugin, the worker, the tokenizer, and mpi_comm_ranks (one
# rank of the communicator check). The plugin's MPI-free parts (the settings blob, the
# allocation lists) are compiled in to be checked directly. Exits 77 without mpirun or
# the plugin. Runs alone: it starts MPI jobs and may make network namespaces.
target_sources(test_launch_mpi PRIVATE ${PROJECT_SOURCE_DIR}/plugins/launch-mpi/group_blob.c
                                       ${PROJECT_SOURCE_DIR}/plugins/launch-mpi/mpi_allocation.c)
target_include_directories(test_launch_mpi PRIVATE ${PROJECT_SOURCE_DIR}/plugins)
add_executable(mpi_comm_ranks ${CMAKE_CURRENT_SOURCE_DIR}/mpi_comm_ranks.c)
target_link_libraries(mpi_comm_ranks PRIVATE cinfer m)
add_dependencies(test_launch_mpi cinfer_worker mpi_comm_ranks)
foreach(plugin cinfer_plugin_launch_mpi cinfer_plugin_tokenizer_bpe)
  if(TARGET ${plugin})
    add_dependencies(test_launch_mpi ${plugin})
  endif()
endforeach()
set_tests_properties(test_launch_mpi PROPERTIES SKIP_RETURN_CODE 77 RUN_SERIAL TRUE TIMEOUT 900)
