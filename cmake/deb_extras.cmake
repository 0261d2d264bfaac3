# Run by CPack (CPACK_PRE_BUILD_SCRIPTS) after the install tree is staged and
# before the .deb is made: adds what lives outside /opt/nereid.
#   /usr/bin/nereid              -> /opt/nereid/bin/nereid
#   /lib/systemd/system/nereid.service (not enabled by the package)
#   /etc/default/nereid          the service's flags (a conffile)
set(root "${CPACK_TEMPORARY_INSTALL_DIRECTORY}")
if(NOT IS_DIRECTORY "${root}/opt/nereid/bin")
  message(FATAL_ERROR "deb_extras: no staged tree in ${root}")
endif()
file(MAKE_DIRECTORY "${root}/usr/bin" "${root}/lib/systemd/system" "${root}/etc/default")
file(CREATE_LINK /opt/nereid/bin/nereid "${root}/usr/bin/nereid" SYMBOLIC)
file(COPY_FILE "${CPACK_NRD_DEB_FILES_DIR}/nereid.service" "${root}/lib/systemd/system/nereid.service")
file(COPY_FILE "${CPACK_NRD_DEB_FILES_DIR}/nereid.default" "${root}/etc/default/nereid")
