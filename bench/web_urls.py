"""The bare floor's one view: `POST /bare` answers 202 JSON, a plain (sync) Django view as most
projects write them, so Django runs it in a thread as it runs `POST /jobs`."""

from django.http import HttpRequest, JsonResponse
from django.urls import path
from django.views.decorators.csrf import csrf_exempt


@csrf_exempt
def bare(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"jobId": "00000000-0000-0000-0000-000000000000"}, status=202)


urlpatterns = [path("bare", bare)]
