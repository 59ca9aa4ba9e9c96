# The one-way layers of liboneinfer (docs/architecture.md), and the two checks that keep them so.
#
# ONEINFER_LAYER_USES_<layer>: the layers whose headers a layer's sources may include and whose
# symbols they may call. Public headers (include/oneinfer/) belong to a layer too:
# cmake/check_layers.cmake maps each to its owner (tensor.h -> base, session.h -> engine_api, ...).
# engine_api is the public C++ API the engine implements; the layers above the engine see that
# and never the engine's internal headers.
set(ONEINFER_LAYER_USES_base   "")
set(ONEINFER_LAYER_USES_graph  base)
set(ONEINFER_LAYER_USES_npu    base)
# ops reaches the NPU leg only through the offload interface the session hands to kernels
# (base/gemm_offload.h).
set(ONEINFER_LAYER_USES_ops    base graph quant)
set(ONEINFER_LAYER_USES_quant  base)
set(ONEINFER_LAYER_USES_engine base graph quant npu ops engine_api)
set(ONEINFER_LAYER_USES_llm    base engine_api llm_api)
# Converters write graphs (graph/) and quantise or pack weights (quant/); they run models and
# tokenize calibration text through the public API only.
set(ONEINFER_LAYER_USES_convert base graph quant engine_api llm_api)
# The C API (include/oneinfer/oneinfer_c.h) wraps the public C++ API and nothing below it.
set(ONEINFER_LAYER_USES_capi   base engine_api llm_api)
# The OpenAI-compatible server (`oneinfer serve`) on the public API. It is not part of
# liboneinfer (it needs cpp-httplib): the command and the tests link it.
set(ONEINFER_LAYER_USES_serve  base engine_api llm_api)

set(ONEINFER_LAYERS "")
set(ONEINFER_LAYER_OBJECTS "")

# oneinfer_layer(NAME FOLDER...): an OBJECT library of every .cc under the folders.
# ONEINFER_LAYER_LIBS_<name>: libraries a layer needs beyond the library's own dependencies.
# ONEINFER_LAYER_OUTSIDE_<name>: ON for a layer left out of liboneinfer.so / .a.
function(oneinfer_layer name)
  set(sources "")
  foreach(dir ${ARGN})
    file(GLOB_RECURSE dir_sources CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/${dir}/*.cc)
    list(APPEND sources ${dir_sources})
  endforeach()
  set(target oneinfer_${name})
  add_library(${target} OBJECT ${sources})
  target_include_directories(${target} PRIVATE
    ${CMAKE_SOURCE_DIR}/include ${CMAKE_BINARY_DIR}/generated/include ${CMAKE_SOURCE_DIR})
  target_link_libraries(${target} PRIVATE
    ${ONEINFER_PUBLIC_DEPS} ${ONEINFER_PRIVATE_DEPS} ${ONEINFER_HEADER_ONLY_DEPS} ${ONEINFER_LAYER_LIBS_${name}})
  target_compile_definitions(${target} PRIVATE ONEINFER_VERSION="${PROJECT_VERSION}")
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-unused-parameter)
  # liboneinfer.so exports only the API (ONEINFER_API in include/oneinfer/); the tests, tools and
  # benches reach internal symbols through the static library, built from the same objects.
  set_target_properties(${target} PROPERTIES CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
  set(ONEINFER_LAYERS ${ONEINFER_LAYERS} ${name} PARENT_SCOPE)
  set(ONEINFER_LAYER_DIRS_${name} ${ARGN} PARENT_SCOPE)
  if(NOT ONEINFER_LAYER_OUTSIDE_${name})
    set(ONEINFER_LAYER_OBJECTS ${ONEINFER_LAYER_OBJECTS} $<TARGET_OBJECTS:${target}> PARENT_SCOPE)
  endif()
endfunction()

# The layers `name` may use, directly or through the layers it uses (engine_api -> engine).
function(oneinfer_layer_closure name out)
  set(result ${name})
  set(queue ${name})
  while(queue)
    list(POP_FRONT queue cur)
    string(REGEX REPLACE "_api$" "" cur ${cur})
    foreach(dep ${ONEINFER_LAYER_USES_${cur}})
      string(REGEX REPLACE "_api$" "" dep ${dep})
      if(NOT dep IN_LIST result)
        list(APPEND result ${dep})
        list(APPEND queue ${dep})
      endif()
    endforeach()
  endwhile()
  set(${out} ${result} PARENT_SCOPE)
endfunction()

function(oneinfer_check_layers)
  # 1. Includes: scanned at configure time and again at build time whenever a source changes.
  set(rules "")
  set(all_files "")
  foreach(layer ${ONEINFER_LAYERS})
    string(APPEND rules "set(USES_${layer} \"${ONEINFER_LAYER_USES_${layer}}\")\n")
    string(APPEND rules "set(DIRS_${layer} \"${ONEINFER_LAYER_DIRS_${layer}}\")\n")
    foreach(dir ${ONEINFER_LAYER_DIRS_${layer}})
      file(GLOB_RECURSE files CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/${dir}/*.cc ${CMAKE_SOURCE_DIR}/${dir}/*.h)
      list(APPEND all_files ${files})
    endforeach()
  endforeach()
  string(APPEND rules "set(LAYERS \"${ONEINFER_LAYERS}\")\n")
  file(WRITE ${CMAKE_BINARY_DIR}/generated/layer_rules.cmake "${rules}")
  set(SRC ${CMAKE_SOURCE_DIR})
  set(RULES ${CMAKE_BINARY_DIR}/generated/layer_rules.cmake)
  include(${CMAKE_SOURCE_DIR}/cmake/check_layers.cmake)
  add_custom_command(OUTPUT ${CMAKE_BINARY_DIR}/generated/layers.stamp
    COMMAND ${CMAKE_COMMAND} -DSRC=${CMAKE_SOURCE_DIR} -DRULES=${RULES}
            -P ${CMAKE_SOURCE_DIR}/cmake/check_layers.cmake
    COMMAND ${CMAKE_COMMAND} -E touch ${CMAKE_BINARY_DIR}/generated/layers.stamp
    DEPENDS ${all_files} ${CMAKE_SOURCE_DIR}/cmake/check_layers.cmake ${CMAKE_SOURCE_DIR}/cmake/layers.cmake
    COMMENT "Checking the include directions of the layers")
  add_custom_target(oneinfer_layer_includes ALL DEPENDS ${CMAKE_BINARY_DIR}/generated/layers.stamp)

  # 2. Links: each layer with only the layers it may use, as a shared object that must resolve
  # every symbol (-Wl,--no-undefined). A call into a layer above fails here.
  foreach(layer ${ONEINFER_LAYERS})
    oneinfer_layer_closure(${layer} closure)
    set(objects "")
    set(libs "")
    foreach(l ${closure})
      list(APPEND objects $<TARGET_OBJECTS:oneinfer_${l}>)
      list(APPEND libs ${ONEINFER_LAYER_LIBS_${l}})
    endforeach()
    add_library(oneinfer_layer_link_${layer} SHARED ${objects})
    target_link_libraries(oneinfer_layer_link_${layer} PRIVATE ${ONEINFER_PUBLIC_DEPS} ${ONEINFER_PRIVATE_DEPS} ${libs})
    target_link_options(oneinfer_layer_link_${layer} PRIVATE -Wl,--no-undefined)
    set_target_properties(oneinfer_layer_link_${layer} PROPERTIES
      LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/layer_links)
    add_dependencies(oneinfer_layer_link_${layer} oneinfer_layer_includes)
  endforeach()
endfunction()
