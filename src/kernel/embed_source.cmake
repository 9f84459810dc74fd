# cmake -DINPUT=kernel.py -DOUTPUT=kernel_source.cc -P embed_source.cmake: the source as a C++
# string (raw literal pieces: one literal may hold at most 64 KiB on some compilers).
# Optional: -DSYMBOL (default kKernelSource), -DHEADER that declares it (default
# kernel/session.h), -DNAMESPACE (default codebox::kernel); src/box embeds warm_python.py too.
if(NOT SYMBOL)
  set(SYMBOL kKernelSource)
endif()
if(NOT HEADER)
  set(HEADER kernel/session.h)
endif()
if(NOT NAMESPACE)
  set(NAMESPACE codebox::kernel)
endif()
file(READ ${INPUT} source)
string(FIND "${source}" ")codebox\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${INPUT} contains the raw-string delimiter )codebox\"")
endif()
string(LENGTH "${source}" length)
set(pieces "")
set(offset 0)
while(offset LESS length)
  string(SUBSTRING "${source}" ${offset} 8000 piece)
  string(APPEND pieces "R\"codebox(${piece})codebox\"\n")
  math(EXPR offset "${offset} + 8000")
endwhile()
get_filename_component(name ${INPUT} NAME)
file(WRITE ${OUTPUT}.tmp "// Generated from ${name} by embed_source.cmake; do not edit.\n"
     "#include \"${HEADER}\"\n\nnamespace ${NAMESPACE} {\n\nconst char ${SYMBOL}[] =\n"
     "${pieces};\n\n}  // namespace ${NAMESPACE}\n")
file(COPY_FILE ${OUTPUT}.tmp ${OUTPUT} ONLY_IF_DIFFERENT)
file(REMOVE ${OUTPUT}.tmp)
