# cmake -DINPUT=kernel.py -DOUTPUT=kernel_source.cc -P embed_source.cmake: the source as a C++
# string (raw literal pieces: one literal may hold at most 64 KiB on some compilers).
# Other files (src/server/openapi.json) pass -DSYMBOL=, -DNAMESPACE= and -DHEADER= too.
if(NOT DEFINED SYMBOL)
  set(SYMBOL kKernelSource)
  set(NAMESPACE codebox::kernel)
  set(HEADER kernel/session.h)
endif()
get_filename_component(input_name ${INPUT} NAME)
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
file(WRITE ${OUTPUT}.tmp "// Generated from ${input_name} by embed_source.cmake; do not edit.\n"
     "#include \"${HEADER}\"\n\nnamespace ${NAMESPACE} {\n\nextern const char ${SYMBOL}[];\n"
     "const char ${SYMBOL}[] =\n${pieces};\n\n}  // namespace ${NAMESPACE}\n")
file(COPY_FILE ${OUTPUT}.tmp ${OUTPUT} ONLY_IF_DIFFERENT)
file(REMOVE ${OUTPUT}.tmp)
