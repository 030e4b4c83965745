# The full engine runs its workers and loads its plugins at run time: build them with
# the benchmark.
foreach(dep IN ITEMS cinfer_worker cinfer_plugin_launch_fork cinfer_plugin_tokenizer_bpe)
  if(TARGET ${dep})
    add_dependencies(bench_scheduler ${dep})
  endif()
endforeach()
