"""Storage's routes, mounted by the portal like every app's: the file browser's pages and the files API."""

from django.urls import URLPattern, URLResolver, include, path

from storage import api, views

file_api: list[URLPattern] = [
    path("ls", api.ListView.as_view(), name="files-ls"),
    path("stat", api.StatView.as_view(), name="files-stat"),
    path("mkdir", api.MkdirView.as_view(), name="files-mkdir"),
    path("rm", api.RemoveView.as_view(), name="files-rm"),
    path("download", api.DownloadView.as_view(), name="files-download"),
    path("uploads", api.UploadListView.as_view(), name="files-uploads"),
    path("uploads/<str:upload_id>", api.UploadDetailView.as_view(), name="files-upload"),
    # <str:index>: the view names a bad index in a 400, where <int:> would make it a bare 404.
    path("uploads/<str:upload_id>/chunks/<str:index>", api.UploadChunkView.as_view(), name="files-upload-chunk"),
    path("uploads/<str:upload_id>/complete", api.UploadCompleteView.as_view(), name="files-upload-complete"),
]

page_urlpatterns: list[URLPattern] = [
    path("files/", views.browser, name="file-browser"),
    path("files/mkdir", views.make_folder, name="file-mkdir"),
    path("files/rm", views.remove, name="file-rm"),
]

api_urlpatterns: list[URLResolver] = [path("files/", include(file_api))]
