// explorer.c: writes the explorer page: a fixed HTML/JavaScript shell with
// the model's data as one JSON object in a script element.
#include "explorer.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../base/base64.h"
#include "../base/files.h"
#include "heatmap.h"

static void json_number(FILE *out, double v) {
    if (isnan(v) || isinf(v)) fputs("null", out);
    else fprintf(out, "%.6g", v);
}

// The shell: the data goes where DATA stands.
static const char *const page_head =
    "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">\n"
    "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
    "script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:\">\n"
    "<title>attention explorer</title>\n<style>\n"
    "body{font-family:sans-serif;margin:12px;color:#222}\n"
    "#bar{display:flex;gap:16px;align-items:center;flex-wrap:wrap}\n"
    "#main{display:flex;gap:16px;align-items:flex-start;margin-top:8px}\n"
    "#readout{font-family:monospace;min-height:1.4em;margin:6px 0;white-space:pre}\n"
    "#text{font-family:monospace;font-size:15px;line-height:1.7;max-width:720px;word-break:break-all}\n"
    "#text span{cursor:pointer;padding:0 1px}\n#text span.sel{background:#fd6;outline:1px solid #c90}\n"
    "table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #ccc;padding:2px 5px;text-align:right;white-space:nowrap}\n"
    "#scale{display:flex;gap:6px;align-items:center;font-size:12px;margin:4px 0}\n"
    "#mask{display:inline-block;width:12px;height:12px;background:repeating-linear-gradient(45deg,#888 0 2px,#b0b0b0 2px 4px)}\n"
    "#viewnote{font-size:13px;color:#a40}\n#legend{font-size:12px;max-width:560px}\n#legend dt{font-weight:bold;float:left;width:5.5em}\n#legend dd{margin:0 0 2px 5.5em}\n"
    "tr.cur{background:#def}tr{cursor:pointer}\n.u{color:#888}\n"
    "</style></head><body>\n<script id=\"data\" type=\"application/json\">\n";

static const char *const page_tail =
    "\n</script>\n"
    "<div id=\"bar\"><b>attention explorer</b>\n"
    "<label>show <select id=\"pick\"></select></label>\n"
    "<span id=\"stepbox\"><label>snapshot <input id=\"step\" type=\"range\" min=\"0\" value=\"0\"></label>"
    " <span id=\"steplabel\"></span> <span id=\"viewnote\"></span></span></div>\n"
    "<div id=\"scale\">attention weight: 0 <canvas id=\"scalebar\" width=\"256\" height=\"12\"></canvas> 1"
    " &nbsp; <span id=\"mask\"></span> the future (masked) &nbsp; row: query (the character looking),"
    " column: key (the character looked at)</div>\n"
    "<div id=\"readout\">hover a cell</div>\n"
    "<div id=\"main\"><div><canvas id=\"canvas\" width=\"10\" height=\"10\"></canvas>\n"
    "<div id=\"text\"></div></div>\n<div><table id=\"scores\"></table>\n"
    "<p class=\"u\" style=\"max-width:560px\">each score of each head; in grey, its value for uniform attention over the"
    " same rows (the same for every head); a head's type is the score furthest above its uniform"
    " value, when that is clear (click a row to show the head)</p>\n"
    "<dl id=\"legend\"><dt>prev</dt><dd>the weight on the character just before</dd>"
    "<dt>self</dt><dd>the weight on the character itself</dd>"
    "<dt>first</dt><dd>the weight on the text's first character (a sink)</dd>"
    "<dt>dup</dt><dd>the weight on earlier copies of the same character</dd>"
    "<dt>induct</dt><dd>induction: on a repeated random probe, the weight on the character after the"
    " earlier copy of this one</dd>"
    "<dt>entropy</dt><dd>how spread the weights are: 0 one key, 1 uniform</dd>"
    "<dt>dist</dt><dd>the mean distance looked back, in characters</dd>"
    "<dt>copy</dt><dd>copying: how much attending to a character raises its own logit, through"
    " W_V, W_O and the unembedding (-1 .. 1; in grey, 0 for random weights)</dd>"
    "<dt>kcomp</dt><dd>K-composition: how much this head's keys read an earlier layer's head"
    " (the largest; in grey, the value for random weights)</dd></dl></div></div>\n"
    "<script>\n"
    "'use strict';\n"
    "const D=JSON.parse(document.getElementById('data').textContent);\n"
    "const L=D.layers,NH=D.heads,cmap=D.colormap;\n"
    "function floats(b64){const s=atob(b64),u=new Uint8Array(s.length);"
    "for(let i=0;i<s.length;i++)u[i]=s.charCodeAt(i);return new Float32Array(u.buffer);}\n"
    "D.views.forEach(v=>{v.A=floats(v.attn);});\n"
    "const S={view:0,layer:-1,head:-1,sel:-1,q:-1,k:-1};\n"
    "const cv=document.getElementById('canvas'),cx=cv.getContext('2d');\n"
    "function shown(c){return c===32?'\\u2423':c===10?'\\u21b5':c===9?'\\u21e5':c===160?'\\u237d':String.fromCodePoint(c);}\n"
    "function w(v,l,h,i,j){return v.A[((l*NH+h)*v.T+i)*v.T+j];}\n"
    "function color(x){const k=Math.max(0,Math.min(255,Math.round(x*255)));return '#'+cmap.substr(6*k,6);}\n"
    "function geom(){const v=D.views[S.view];if(S.layer<0){const t=Math.max(2,Math.floor(160/v.T));"
    "return {over:true,cell:t,tile:t*v.T+12,x0:60,y0:24};}"
    "return {over:false,cell:Math.max(4,Math.min(16,Math.floor(720/v.T))),x0:24,y0:24};}\n"
    "function draw(){const v=D.views[S.view],g=geom();\n"
    " if(g.over){cv.width=g.x0+NH*g.tile;cv.height=g.y0+L*g.tile;}else{cv.width=g.x0+v.T*g.cell+4;cv.height=g.y0+v.T*g.cell+4;}\n"
    " cx.fillStyle='#fff';cx.fillRect(0,0,cv.width,cv.height);cx.font='12px sans-serif';cx.fillStyle='#222';\n"
    " if(g.over){for(let l=0;l<L;l++){cx.fillStyle='#222';cx.fillText('layer '+l,4,g.y0+l*g.tile+g.tile/2);\n"
    "  for(let h=0;h<NH;h++){if(l===0)cx.fillText('head '+h,g.x0+h*g.tile,16);tile(v,l,h,g.x0+h*g.tile,g.y0+l*g.tile,g.cell);\n"
    "   const t=v.scores?D.tags[S.view][l*NH+h]:'';if(t){cx.fillStyle='#fff';cx.fillRect(g.x0+h*g.tile+g.cell*v.T-40,g.y0+l*g.tile,40,14);"
    "cx.fillStyle='#222';cx.fillText(t,g.x0+h*g.tile+g.cell*v.T-38,g.y0+l*g.tile+11);}}}return;}\n"
    " tile(v,S.layer,S.head,g.x0,g.y0,g.cell);cx.fillStyle='#222';cx.font=Math.max(8,g.cell-2)+'px monospace';\n"
    " for(let i=0;i<v.T;i++){cx.fillText(shown(v.chars[i]),g.x0+i*g.cell+1,g.y0-4);cx.fillText(shown(v.chars[i]),4,g.y0+(i+1)*g.cell-2);}\n"
    " if(S.sel>=0){cx.strokeStyle='#f40';cx.lineWidth=2;cx.strokeRect(g.x0,g.y0+S.sel*g.cell,v.T*g.cell,g.cell);"
    "cx.strokeRect(g.x0+S.sel*g.cell,g.y0,g.cell,v.T*g.cell);}\n"
    " if(S.q>=0){cx.strokeStyle='#fff';cx.lineWidth=1;cx.strokeRect(g.x0+S.k*g.cell+.5,g.y0+S.q*g.cell+.5,g.cell-1,g.cell-1);}}\n"
    "function tile(v,l,h,x0,y0,c){for(let i=0;i<v.T;i++)for(let j=0;j<v.T;j++){"
    "cx.fillStyle=j>i?((i+j)%2?'#b0b0b0':'#888'):color(w(v,l,h,i,j));cx.fillRect(x0+j*c,y0+i*c,c,c);}}\n"
    "function readout(l,h,i,j){const v=D.views[S.view],r=document.getElementById('readout');\n"
    " if(j>i){r.textContent='query '+i+' \\''+shown(v.chars[i])+'\\' cannot see key '+j+' (the future)';r.dataset.weight='';return;}\n"
    " const x=w(v,l,h,i,j);r.dataset.layer=l;r.dataset.head=h;r.dataset.q=i;r.dataset.k=j;r.dataset.weight=x.toFixed(6);\n"
    " r.textContent='layer '+l+' head '+h+': query \\''+shown(v.chars[i])+'\\' (position '+i+') -> key \\''+shown(v.chars[j])+'\\' (position '+j+'): weight '+x.toFixed(6);}\n"
    "cv.addEventListener('mousemove',e=>{const g=geom(),v=D.views[S.view],r=cv.getBoundingClientRect();\n"
    " const x=e.clientX-r.left,y=e.clientY-r.top;let l=S.layer,h=S.head,c=g.cell,x0=g.x0,y0=g.y0;\n"
    " if(g.over){h=Math.floor((x-g.x0)/g.tile);l=Math.floor((y-g.y0)/g.tile);if(h<0||l<0||h>=NH||l>=L)return;x0+=h*g.tile;y0+=l*g.tile;}\n"
    " const j=Math.floor((x-x0)/c),i=Math.floor((y-y0)/c);if(i<0||j<0||i>=v.T||j>=v.T)return;S.q=i;S.k=j;readout(l,h,i,j);if(!g.over)draw();});\n"
    "cv.addEventListener('click',e=>{const g=geom();if(!g.over)return;const r=cv.getBoundingClientRect();\n"
    " const h=Math.floor((e.clientX-r.left-g.x0)/g.tile),l=Math.floor((e.clientY-r.top-g.y0)/g.tile);if(h>=0&&l>=0&&h<NH&&l<L)select(l,h);});\n"
    "function select(l,h){S.layer=l;S.head=h;document.getElementById('pick').value=l<0?'o':l+','+h;S.q=-1;draw();table();}\n"
    "function text(){const v=D.views[S.view],t=document.getElementById('text');t.textContent='';\n"
    " v.chars.forEach((c,i)=>{const s=document.createElement('span');s.textContent=shown(c);s.title='position '+i;\n"
    "  if(i===S.sel)s.className='sel';s.onclick=()=>{S.sel=S.sel===i?-1:i;text();draw();};t.appendChild(s);});}\n"
    "function table(){const v=D.views[S.view],t=document.getElementById('scores');\n"
    " let s='<tr><th>layer</th><th>head</th>'+D.scoreTags.map((n,k)=>'<th title=\"'+D.scoreNames[k]+'\">'+n+'</th>').join('')+'<th>type</th></tr>';\n"
    " const u=v.scores?v.scores[0]:null;s+='<tr class=\"u\"><td colspan=\"2\">uniform</td>';\n"
    " for(let k=0;k<D.scoreNames.length;k++){const p=u?u[k]:null;s+='<td>'+(p&&p[1]!==null?p[1].toFixed(3):'-')+'</td>';}s+='<td></td></tr>';\n"
    " for(let h=0;h<L*NH;h++){const r=v.scores?v.scores[h]:null;s+='<tr data-h=\"'+h+'\"'+(S.layer*NH+S.head===h?' class=\"cur\"':'')+'><td>'+Math.floor(h/NH)+'</td><td>'+h%NH+'</td>';\n"
    "  for(let k=0;k<D.scoreNames.length;k++){const p=r?r[k]:null;s+='<td>'+(p&&p[0]!==null?p[0].toFixed(3):'-')+'</td>';}\n"
    "  s+='<td>'+(D.tags[S.view][h]||'')+'</td></tr>';}\n"
    " t.innerHTML=s;t.querySelectorAll('tr[data-h]').forEach(r=>r.onclick=()=>{const h=+r.dataset.h;select(Math.floor(h/NH),h%NH);});}\n"
    "function setView(n){S.view=n;const v=D.views[n];document.getElementById('step').value=n;\n"
    " document.getElementById('steplabel').textContent=v.label+(v.loss!==null?' (loss '+v.loss.toFixed(3)+')':'')"
    "+(v.icl!==null?'; ICL score '+v.icl.toFixed(3)+' (the loss late in the context minus early; 0: no gain)':'')"
    "+(v.sink!==null?'; attention-sink rate '+v.sink.toFixed(2):'');\n"
    " document.getElementById('viewnote').textContent=v.step<0?'':'a training snapshot: the text shown is"
    " the training probe, not your text';\n"
    " S.sel=-1;S.q=-1;text();draw();table();}\n"
    "const pick=document.getElementById('pick');pick.add(new Option('overview','o'));\n"
    "for(let l=0;l<L;l++)for(let h=0;h<NH;h++)pick.add(new Option('layer '+l+' head '+h,l+','+h));\n"
    "pick.onchange=()=>{if(pick.value==='o')select(-1,-1);else{const p=pick.value.split(',');select(+p[0],+p[1]);}};\n"
    "const st=document.getElementById('step');st.max=D.views.length-1;st.oninput=()=>setView(+st.value);\n"
    "(function(){const b=document.getElementById('scalebar').getContext('2d');"
    "for(let k=0;k<256;k++){b.fillStyle=color(k/255);b.fillRect(k,0,1,12);}})();\n"
    "if(D.views.length<2)document.getElementById('stepbox').style.display='none';\n"
    "function fragment(){const f=new URLSearchParams(location.hash.slice(1));const n=x=>f.has(x)?parseInt(f.get(x),10):null;\n"
    " const v=n('view');setView(v!==null&&v>=0&&v<D.views.length?v:0);\n"
    " const l=n('layer'),h=n('head');if(l!==null&&h!==null&&l>=0&&l<L&&h>=0&&h<NH)select(l,h);else select(-1,-1);\n"
    " const q=n('q'),k=n('k'),V=D.views[S.view];if(q!==null&&k!==null&&S.layer>=0&&q>=0&&k>=0&&q<V.T&&k<V.T){S.q=q;S.k=k;readout(S.layer,S.head,q,k);draw();}}\n"
    "window.addEventListener('hashchange',fragment);fragment();\n";

// What ends the page's script.
static const char *const page_end =
    "document.body.dataset.resources=performance.getEntriesByType('resource').length;\n"
    "document.body.dataset.ready='1';\n"
    "</script></body></html>\n";

// The views of D.analyses, when bin/attn had them: written into the script
// before page_end, so that a page without them is as it always was.
static const char *const analyses_script =
    "(function(){const A=D.analyses,T=A.T,W=A.window;\n"
    "const sec=document.createElement('div');sec.id='analyses';document.body.appendChild(sec);\n"
    "const out=document.createElement('div');out.id='aread';out.style.cssText='font-family:monospace;"
    "min-height:1.4em;margin:6px 0;white-space:pre';out.textContent='hover a cell of the views below';sec.appendChild(out);\n"
    "function esc(c){return shown(c).replace(/&/g,'&amp;').replace(/</g,'&lt;').replace(/\"/g,'&quot;');}\n"
    "function dcol(x){x=Math.max(-1,Math.min(1,x));const t=Math.abs(x),e=x<0?[33,102,172]:[178,24,43];"
    "return 'rgb('+e.map(v=>Math.round(255+t*(v-255))).join(',')+')';}\n"
    "function sign(x,n){return (x>=0?'+':'')+x.toFixed(n);}\n"
    "function heading(t){const h=document.createElement('h3');h.textContent=t;sec.appendChild(h);return h;}\n"
    "if(A.ablation||A.lens||A.attribution)heading('Why a head matters, on the text\\'s first '+(T+1)+' characters (each position predicting the next)');\n"
    "if(A.ablation){const b=A.ablation,frozen=b.units[0].meanFrozen!==undefined;let top=1e-9,kind='mean';\n"
    " b.units.forEach(u=>{top=Math.max(top,Math.abs(u.zero-b.loss),Math.abs(u.mean-b.loss));"
    "if(frozen)top=Math.max(top,Math.abs(u.zeroFrozen-b.loss),Math.abs(u.meanFrozen-b.loss));});\n"
    " heading('ablation: the loss increase without each head, or a layer\\'s whole attention or MLP ('+b.positions+' predictions in '+b.windows+' window'+(b.windows>1?'s':'')+', loss '+b.loss.toFixed(4)+' unchanged)');\n"
    " const k=document.createElement('select');k.id='ablationkind';k.add(new Option('mean-ablated','mean'));k.add(new Option('zero-ablated','zero'));\n"
    " if(frozen){k.add(new Option('mean-ablated, later patterns frozen','meanFrozen'));k.add(new Option('zero-ablated, later patterns frozen','zeroFrozen'));}sec.appendChild(k);\n"
    " const t=document.createElement('table');t.id='ablation';sec.appendChild(t);\n"
    " function fill(){let s='<tr><th>layer</th>';for(let h=0;h<NH;h++)s+='<th>head '+h+'</th>';s+='<th>attn</th><th>mlp</th></tr>';\n"
    "  for(let l=0;l<L;l++){s+='<tr><td>'+l+'</td>';for(let c=0;c<NH+2;c++){const i=l*(NH+2)+c,u=b.units[i],d=u[kind]-b.loss;\n"
    "   s+='<td data-unit=\"'+i+'\" data-increase=\"'+d.toFixed(6)+'\" style=\"background:'+dcol(d/top)+(Math.abs(d/top)>0.6?';color:#fff':'')+'\">'+sign(d,3)+'</td>';}s+='</tr>';}\n"
    "  t.innerHTML=s;}\n"
    " k.onchange=()=>{kind=k.value;fill();};fill();\n"
    " t.onmouseover=e=>{const c=e.target.closest('td[data-unit]');if(!c)return;const u=b.units[+c.dataset.unit];\n"
    "  out.textContent='layer '+u.layer+' '+(u.head==='attn'||u.head==='mlp'?u.head:'head '+u.head)+': loss '+b.loss.toFixed(6)+' unchanged, '+u.zero.toFixed(6)+' zero-ablated, '+u.mean.toFixed(6)+' mean-ablated'"
    "+(frozen?'; later patterns frozen: '+u.zeroFrozen.toFixed(6)+' zero-ablated, '+u.meanFrozen.toFixed(6)+' mean-ablated':'');};}\n"
    "let showAttr=null;\n"
    "if(A.lens){const n=A.lens;heading('logit lens: the most likely next character after the embeddings and each block, on the colour of the true one\\'s probability (click a column for its attribution)');\n"
    " const t=document.createElement('table');t.id='lens';t.style.fontFamily='monospace';sec.appendChild(t);\n"
    " let s='<tr><th>text</th>';for(let i=0;i<T;i++)s+='<th data-pos=\"'+i+'\">'+esc(W[i])+'</th>';s+='</tr>';\n"
    " for(let d=0;d<=L;d++){s+='<tr><th>'+(d?'block '+(d-1):'embed')+'</th>';for(let i=0;i<T;i++){const j=d*T+i,p=n.nextProb[j];\n"
    "  s+='<td data-depth=\"'+d+'\" data-pos=\"'+i+'\" data-next-prob=\"'+p.toFixed(6)+'\" style=\"text-align:center;background:'+color(p)+';color:'+(p<0.5?'#fff':'#222')+'\">'+esc(n.top[j])+'</td>';}s+='</tr>';}\n"
    " s+='<tr><th>next</th>';for(let i=0;i<T;i++)s+='<th>'+esc(W[i+1])+'</th>';t.innerHTML=s+'</tr>';\n"
    " t.onmouseover=e=>{const c=e.target.closest('td[data-depth]');if(!c)return;const d=+c.dataset.depth,i=+c.dataset.pos,j=d*T+i;\n"
    "  out.textContent=(d?'after block '+(d-1):'after the embeddings')+', position '+i+' \\''+shown(W[i])+'\\': most likely next \\''+shown(n.top[j])+'\\' '+n.topProb[j].toFixed(6)+', true next \\''+shown(W[i+1])+'\\' '+n.nextProb[j].toFixed(6);};\n"
    " t.onclick=e=>{const c=e.target.closest('[data-pos]');if(c&&showAttr)showAttr(+c.dataset.pos);};}\n"
    "if(A.attribution){const at=A.attribution;heading('attribution: what each part of the final stream adds to logit(true next) - logit(the most likely other)');\n"
    " const box=document.createElement('div');box.id='attribution';sec.appendChild(box);\n"
    " showAttr=p=>{const a=at[p];let top=1e-9;a.parts.forEach(x=>{top=Math.max(top,Math.abs(x[1]));});\n"
    "  box.dataset.position=p;box.dataset.logitDiff=a.diff.toFixed(6);box.dataset.total=a.total.toFixed(6);\n"
    "  let s='<p>position '+p+', reading \\''+esc(W[p])+'\\': logit(\\''+esc(a.next)+'\\') - logit(\\''+esc(a.other)+'\\') = '+a.diff.toFixed(4)+'; the parts add up to '+a.total.toFixed(4)+'</p><table>';\n"
    "  a.parts.forEach(x=>{const v=x[1],w=Math.round(200*Math.abs(v)/top),bar='<div style=\"display:inline-block;height:10px;width:'+w+'px;background:'+dcol(v>=0?0.8:-0.8)+'\"></div>';\n"
    "   s+='<tr class=\"bar\" data-part=\"'+x[0]+'\" data-value=\"'+v.toFixed(6)+'\" title=\"'+x[0]+': '+sign(v,6)+'\"><td style=\"text-align:left\">'+x[0]+'</td>'"
    "+'<td style=\"width:200px;text-align:right\">'+(v<0?bar:'')+'</td><td style=\"width:200px;text-align:left\">'+(v>=0?bar:'')+'</td><td>'+sign(v,4)+'</td></tr>';});\n"
    "  box.innerHTML=s+'</table>';};\n"
    " box.onmouseover=e=>{const r=e.target.closest('tr[data-part]');if(r)out.textContent=r.dataset.part+': '+sign(+r.dataset.value,6);};\n"
    " const f=new URLSearchParams(location.hash.slice(1)),p=f.has('pos')?parseInt(f.get('pos'),10):A.chosen;\n"
    " showAttr(p>=0&&p<T?p:A.chosen);}\n"
    "if(A.patching){const P=A.patching,PT=P.T;let top=1;P.heads.concat(P.stream).forEach(x=>{top=Math.max(top,Math.abs(x));});\n"
    " heading('activation patching: how much of the clean run\\'s logit(\\''+shown(P.answers[0])+'\\') - logit(\\''+shown(P.answers[1])+'\\') at the last position comes back when one activation of the clean run replaces the corrupted run\\'s');\n"
    " const n=document.createElement('p');n.className='u';n.textContent='LD clean '+P.cleanDiff.toFixed(4)+', corrupted '+P.corruptDiff.toFixed(4)+'; recovery = (LD patched - LD corrupted) / (LD clean - LD corrupted): 0 nothing back (white), 1 all of it (red), below 0 blue';sec.appendChild(n);\n"
    " function cellStyle(r){return 'background:'+dcol(r/top)+(Math.abs(r/top)>0.6?';color:#fff':'');}\n"
    " const ht=document.createElement('table');ht.id='patch-heads';sec.appendChild(ht);\n"
    " let s='<tr><th>layer</th>';for(let h=0;h<NH;h++)s+='<th>head '+h+'</th>';s+='</tr>';\n"
    " for(let l=0;l<L;l++){s+='<tr><td>'+l+'</td>';for(let h=0;h<NH;h++){const r=P.heads[l*NH+h];\n"
    "  s+='<td data-layer=\"'+l+'\" data-head=\"'+h+'\" data-recovery=\"'+r.toFixed(6)+'\" style=\"'+cellStyle(r)+'\">'+r.toFixed(3)+'</td>';}s+='</tr>';}\n"
    " ht.innerHTML=s;\n"
    " ht.onmouseover=e=>{const c=e.target.closest('td[data-head]');if(!c)return;const i=(+c.dataset.layer)*NH+(+c.dataset.head);\n"
    "  out.textContent='layer '+c.dataset.layer+' head '+c.dataset.head+' patched: LD '+P.headDiffs[i].toFixed(6)+', recovery '+P.heads[i].toFixed(6);};\n"
    " const st=document.createElement('table');st.id='patch-stream';st.style.fontFamily='monospace';sec.appendChild(st);\n"
    " s='<tr><th>clean</th>';for(let t=0;t<PT;t++)s+='<th>'+esc(P.clean[t])+'</th>';s+='</tr>';\n"
    " for(let l=0;l<L;l++){s+='<tr><th>block '+l+'</th>';for(let t=0;t<PT;t++){const r=P.stream[l*PT+t];\n"
    "  s+='<td data-layer=\"'+l+'\" data-pos=\"'+t+'\" data-recovery=\"'+r.toFixed(6)+'\" style=\"min-width:10px;'+cellStyle(r)+'\"></td>';}s+='</tr>';}\n"
    " s+='<tr><th>corrupt</th>';for(let t=0;t<PT;t++)s+='<th style=\"color:#b2182b\">'+(P.corrupt[t]!==P.clean[t]?esc(P.corrupt[t]):'')+'</th>';st.innerHTML=s+'</tr>';\n"
    " st.onmouseover=e=>{const c=e.target.closest('td[data-pos]');if(!c)return;const l=+c.dataset.layer,t=+c.dataset.pos,i=l*PT+t;\n"
    "  out.textContent='the stream into block '+l+' at position '+t+' \\''+shown(P.clean[t])+'\\''+(P.corrupt[t]!==P.clean[t]?' (corrupted: \\''+shown(P.corrupt[t])+'\\')':'')+' patched: LD '+P.streamDiffs[i].toFixed(6)+', recovery '+P.stream[i].toFixed(6);};}\n"
    "})();\n";

// What the attribution of a block other than GPT-2's is of, for the page
// (interpret.h): its norm, its missing position part, its cap. Returns 0
// (note unset) for GPT-2's block, whose page says nothing more.
static int attribution_note(const Attribution *a, char *note, size_t len) {
    if (a->norm_bias && a->position_part && a->softcap == 0) return 0;
    snprintf(note, len, "%s%s", a->norm_bias ? "" : "ln_f is an RMSNorm: the parts are not "
             "centred and there is no ln_f bias. ", a->position_part ? "" : "RoPE: no position "
             "embedding part; positions rotate the queries and keys, inside the heads' parts. ");
    if (a->softcap > 0) {
        size_t used = strlen(note);
        snprintf(note + used, len - used, "Softcap %g: the difference and its parts are those of "
                 "the logits z before the cap; the model's logits are %g tanh(z/%g).", a->softcap,
                 a->softcap, a->softcap);
    }
    return 1;
}

// The note above the attribution's box, when the data has one (a block
// other than GPT-2's): after analyses_script, so that GPT-2's page is as
// it always was.
static const char *const attribution_note_script =
    "(function(){const b=document.getElementById('attribution'),n=D.analyses.attributionNote;"
    "if(!b||!n)return;const p=document.createElement('p');p.id='attribution-note';p.className='u';"
    "p.textContent=n;b.parentNode.insertBefore(p,b);})();\n";

static void json_code_points(FILE *out, const uint32_t *chars, int n) {
    fputc('[', out);
    for (int i = 0; i < n; i++) fprintf(out, "%s%u", i ? "," : "", (unsigned)chars[i]);
    fputc(']', out);
}

// ,"patching":{...}: the texts, the answers, the logit differences and
// each patch's recovery and its own logit difference.
static void patching_json(FILE *out, const PatchingPicture *picture) {
    const Patching *p = picture->patching;
    int T = p->T, heads = p->layers * p->heads;
    long cells = (long)p->layers * T;
    fprintf(out, ",\n\"patching\":{\"T\":%d,\"clean\":", T);
    json_code_points(out, picture->clean, T);
    fputs(",\"corrupt\":", out);
    json_code_points(out, picture->corrupt, T);
    fprintf(out, ",\"answers\":[%u,%u],\"cleanDiff\":%.9g,\"corruptDiff\":%.9g,\n\"heads\":[",
            (unsigned)picture->clean_answer, (unsigned)picture->corrupt_answer, p->clean_diff,
            p->corrupt_diff);
    for (int i = 0; i < heads; i++)
        fprintf(out, "%s%.9g", i ? "," : "", patching_recovery(p, p->head_diff[i]));
    fputs("],\"headDiffs\":[", out);
    for (int i = 0; i < heads; i++) fprintf(out, "%s%.9g", i ? "," : "", p->head_diff[i]);
    fputs("],\n\"stream\":[", out);
    for (long i = 0; i < cells; i++)
        fprintf(out, "%s%.9g", i ? "," : "", patching_recovery(p, p->stream_diff[i]));
    fputs("],\"streamDiffs\":[", out);
    for (long i = 0; i < cells; i++) fprintf(out, "%s%.9g", i ? "," : "", p->stream_diff[i]);
    fputs("]}", out);
}

// ,"analyses":{...}: the window, and each part asked for (else null).
static void analyses_json(FILE *out, int L, int NH, const ExplorerAnalyses *a) {
    int T = a->T;
    fprintf(out, ",\n\"analyses\":{\"T\":%d,\"chosen\":%d,\"window\":", T, a->chosen_position);
    json_code_points(out, a->chars, a->chars ? T + 1 : 0); // none with --patch alone
    fputs(",\n\"ablation\":", out);
    if (a->zero_loss) {
        fprintf(out, "{\"loss\":%.9g,\"positions\":%ld,\"windows\":%d,\"units\":[", a->loss,
                a->positions, a->windows);
        for (int l = 0; l < L; l++)
            for (int c = 0; c < NH + 2; c++) {
                int u = c < NH ? l * NH + c : L * NH + 2 * l + (c - NH);
                fprintf(out, "%s{\"layer\":%d,\"head\":", l + c ? "," : "", l);
                if (c < NH) fprintf(out, "%d", c);
                else fprintf(out, "\"%s\"", c == NH ? "attn" : "mlp");
                fprintf(out, ",\"zero\":%.9g,\"mean\":%.9g", a->zero_loss[u], a->mean_loss[u]);
                if (a->zero_frozen_loss)
                    fprintf(out, ",\"zeroFrozen\":%.9g,\"meanFrozen\":%.9g",
                            a->zero_frozen_loss[u], a->mean_frozen_loss[u]);
                fputc('}', out);
            }
        fputs("]}", out);
    } else {
        fputs("null", out);
    }
    fputs(",\n\"lens\":", out);
    if (a->lens) {
        int n = (L + 1) * T;
        fputs("{\"top\":[", out);
        for (int i = 0; i < n; i++) fprintf(out, "%s%u", i ? "," : "", (unsigned)a->code_points[a->lens[i].top]);
        fputs("],\"topProb\":[", out);
        for (int i = 0; i < n; i++) fprintf(out, "%s%.6g", i ? "," : "", a->lens[i].top_prob);
        fputs("],\"nextProb\":[", out);
        for (int i = 0; i < n; i++) fprintf(out, "%s%.6g", i ? "," : "", a->lens[i].target_prob);
        fputs("]}", out);
    } else {
        fputs("null", out);
    }
    fputs(",\n\"attribution\":", out);
    if (a->attributions) {
        fputc('[', out);
        for (int t = 0; t < T; t++) {
            const Attribution *p = &a->attributions[t];
            fprintf(out, "%s\n{\"next\":%u,\"other\":%u,\"diff\":%.9g,\"total\":%.9g,\"parts\":[",
                    t ? "," : "", (unsigned)a->code_points[p->target],
                    (unsigned)a->code_points[p->other], p->logit_diff, attribution_total(p));
            fprintf(out, "[\"token embedding\",%.9g]", p->token_embedding);
            if (p->position_part) // RoPE: no such part (interpret.h)
                fprintf(out, ",[\"position embedding\",%.9g]", p->position_embedding);
            for (int l = 0; l < L; l++) {
                for (int h = 0; h < NH; h++)
                    fprintf(out, ",[\"layer %d head %d\",%.9g]", l, h, p->heads[l * NH + h]);
                fprintf(out, ",[\"layer %d mlp\",%.9g]", l, p->mlps[l]);
            }
            fprintf(out, ",[\"rest\",%.9g]]}", p->rest);
        }
        fputc(']', out);
        char note[600];
        if (attribution_note(&a->attributions[a->chosen_position], note, sizeof note)) {
            fputs(",\n\"attributionNote\":\"", out);
            fputs(note, out); // plain ASCII from this program, no quote or backslash
            fputc('"', out);
        }
    } else {
        fputs("null", out);
    }
    if (a->patching) patching_json(out, a->patching);
    fputc('}', out);
}

int explorer_write(const char *path, int L, int NH, const ExplorerView *views, int num_views,
                   const ExplorerAnalyses *analyses, char *err, size_t err_len) {
    AtomicFile af;
    if (!atomic_file_open(&af, path, err, err_len)) return 0;
    FILE *out = af.file;
    fputs(page_head, out);
    fprintf(out, "{\"layers\":%d,\"heads\":%d,\"colormap\":\"", L, NH);
    for (int k = 0; k < HEATMAP_COLORS; k++) {
        uint8_t rgb[3];
        colormap_rgb(COLORMAP_VIRIDIS, k, rgb);
        fprintf(out, "%02x%02x%02x", rgb[0], rgb[1], rgb[2]);
    }
    fputs("\",\"scoreNames\":[", out);
    for (int k = 0; k < NUM_SCORES; k++) fprintf(out, "%s\"%s\"", k ? "," : "", score_name(k));
    fputs("],\"scoreTags\":[", out);
    for (int k = 0; k < NUM_SCORES; k++) fprintf(out, "%s\"%s\"", k ? "," : "", score_tag(k));
    fputs("],\"tags\":[", out);
    for (int v = 0; v < num_views; v++) {
        fputs(v ? ",[" : "[", out);
        for (int h = 0; h < L * NH; h++) {
            int type = views[v].scores ? head_dominant_type(&views[v].scores[h]) : -1;
            fprintf(out, "%s\"%s\"", h ? "," : "", type >= 0 ? score_tag(type) : "");
        }
        fputs("]", out);
    }
    fputs("],\"views\":[", out);
    for (int v = 0; v < num_views; v++) {
        const ExplorerView *view = &views[v];
        fprintf(out, "%s\n{\"label\":\"", v ? "," : "");
        for (const char *c = view->label; *c; c++) // labels are plain ASCII from this program
            if (*c != '"' && *c != '\\' && *c != '<') fputc(*c, out);
        fprintf(out, "\",\"step\":%ld,\"loss\":", view->step);
        json_number(out, view->loss);
        fputs(",\"icl\":", out);
        json_number(out, view->icl);
        fputs(",\"sink\":", out);
        json_number(out, view->sink_rate);
        fprintf(out, ",\"T\":%d,\"chars\":[", view->T);
        for (int i = 0; i < view->T; i++) fprintf(out, "%s%u", i ? "," : "", (unsigned)view->chars[i]);
        fputs("],\"scores\":", out);
        if (!view->scores) {
            fputs("null", out);
        } else {
            fputs("[", out);
            for (int h = 0; h < L * NH; h++) {
                fputs(h ? ",[" : "[", out);
                for (int k = 0; k < NUM_SCORES; k++) {
                    fputs(k ? ",[" : "[", out);
                    json_number(out, view->scores[h].value[k]);
                    fputs(",", out);
                    json_number(out, view->scores[h].uniform[k]);
                    fputs("]", out);
                }
                fputs("]", out);
            }
            fputs("]", out);
        }
        fputs(",\"attn\":\"", out);
        // little-endian floats (x86, ARM)
        base64_write(out, view->attn, sizeof(float) * L * NH * view->T * view->T);
        fputs("\"}", out);
    }
    fputs("]", out);
    if (analyses) analyses_json(out, L, NH, analyses);
    fputs("}", out);
    fputs(page_tail, out);
    if (analyses) fputs(analyses_script, out);
    char note[600];
    if (analyses && analyses->attributions &&
        attribution_note(&analyses->attributions[analyses->chosen_position], note, sizeof note))
        fputs(attribution_note_script, out);
    fputs(page_end, out);
    if (ferror(out)) atomic_file_write_failed(&af);
    return atomic_file_commit(&af, err, err_len);
}
