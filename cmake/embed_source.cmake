# cmake -DINPUT=FILE -DOUTPUT=FILE_source.cc -DSYMBOL=kName -DHEADER=dir/name.h
#       -DNAMESPACE=codebox::dir -P cmake/embed_source.cmake
# The file's text as a C++ string `const char SYMBOL[]` in NAMESPACE, defined in OUTPUT, which
# includes HEADER (where it is declared). Raw literal pieces: one literal may hold at most 64 KiB
# on some compilers. Used by src/interpreter (ipython_kernel.py, warm_python.py) and src/server
# (openapi.json, the playground).
foreach(required INPUT OUTPUT SYMBOL HEADER NAMESPACE)
  if(NOT ${required})
    message(FATAL_ERROR "embed_source.cmake: -D${required}= is required")
  endif()
endforeach()
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
